"""Card backends: one module per vendor, each registering itself in ``base.REGISTRY``,
and the parts they share (docs/vendors.md)."""
