"""The TUI's widgets.

``binning``, ``fmt`` and ``rows`` are plain Python (no Textual) so that they can be unit
tested and so that importing them never drags Textual into a headless process; the
widget modules (``timechart``, ``header``, ``advice``) are the only ones that import
Textual. This ``__init__`` imports nothing for the same reason.
"""
