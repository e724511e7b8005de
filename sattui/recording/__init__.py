"""Recordings: the JSON Lines format ``sattui/1`` (docs/format.md documents every field).

``file`` writes and reads them (crash-tolerant, streaming); ``schema`` checks each
record's field types as it is read. Everything a caller needs is re-exported here.
"""

from sattui.recording.file import (
                                   FORMAT,
                                   FORMAT_FAMILY,
                                   KINDS,
                                   RecordingReader,
                                   RecordingWriter,
                                   clean_json,
                                   make_header,
                                   samples_from_record,
                                   stacks_to_record,
)

__all__ = ["FORMAT", "FORMAT_FAMILY", "KINDS", "RecordingReader", "RecordingWriter", "clean_json", "make_header",
           "samples_from_record", "stacks_to_record"]
