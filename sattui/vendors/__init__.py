"""Vendor backends: one module per vendor, registered in base.REGISTRY."""
