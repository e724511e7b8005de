"""The node's exporter (``--metrics HOST:PORT``: node.py keeps the
facts, exposition.py names them, server.py serves them, feed.py keeps the advisor's
ledger flowing into them on a headless ``record``)."""
