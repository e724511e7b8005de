"""Stand-ins for vendor libraries, injected through ``sys.modules`` in unit tests."""
