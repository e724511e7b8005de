"""Errors that end a command with one line on stderr and a non-zero exit."""


class SattuiError(Exception):
    """A user-facing failure: its message is printed as one line, no traceback."""

    exit_code = 2


class RecordingError(SattuiError):
    """A recording that cannot be read (foreign, empty, unknown version, bad line)."""


class TargetError(SattuiError):
    """The process to watch does not exist or cannot be read."""
