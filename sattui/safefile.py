"""Files sattui writes, created so that a planted link or an existing file is never
written through.

sattui usually runs as root, and users often point it at shared directories
(``-o /tmp/run.jsonl``). Opening such a path the ordinary way (``open(path, "w")``)
follows a symbolic link another user planted there and overwrites whatever it points
to; it also truncates an existing file without a word. Every file sattui writes (a
recording, the trainer's log, a screenshot) is created here instead:

* a new file is created with ``O_CREAT | O_EXCL | O_NOFOLLOW``, mode 0600: it cannot
  already exist, and the kernel refuses a link at the final component;
* an existing file is replaced only when the user asks (``--force``); otherwise the
  refusal is one line naming the flag;
* a symbolic link, a directory or any other non-regular file (a FIFO, a device) is never
  replaced, not even with ``--force``: replacing ``/dev/null`` or a link somebody
  planted is never what the user meant;
* a replacement is written beside the old file (a temporary name in the same directory,
  made with ``O_EXCL``) and renamed over it. A streaming recording is renamed into place
  at once, right after its creation, and then written in place: the file under its name
  is the live one from the first record on, so whatever stops sattui (even SIGKILL)
  leaves a recording that reads back, and the name never points at anything but the
  old file or the new one. A whole file (a screenshot) is renamed once complete.

Only the final component is checked: the directories above it are the user's choice.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile

from sattui.errors import SattuiError

FORCE_FLAG = "--force"
MODE = 0o600
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class OutputError(SattuiError):
    """An output file that may not or cannot be written."""


def _say(path: str, why: str) -> OutputError:
    return OutputError(f"cannot write {path}: {why}")


def _refuse_existing(path: str, st: os.stat_result, force: bool) -> None:
    """Raise unless ``st`` (an lstat of ``path``) is a regular file we were asked to replace."""
    if stat.S_ISLNK(st.st_mode):
        raise _say(path, "it is a symbolic link; sattui never writes through one, "
                         f"not even with {FORCE_FLAG}: remove it or choose another path")
    if stat.S_ISDIR(st.st_mode):
        raise _say(path, "is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise _say(path, f"not a regular file; sattui does not replace it, not even with {FORCE_FLAG}")
    if not force:
        raise _say(path, f"the file exists; pass {FORCE_FLAG} to replace it")


def check_output(path: str, force: bool = False) -> None:
    """Fail before anything starts when ``path`` cannot or may not be written.

    The checks are repeated when the file is really created (:func:`open_output`), so a
    file appearing in between is still caught; this is only the early, friendly answer.
    """
    d = os.path.dirname(os.path.abspath(path)) or "."
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise _say(path, e.strerror or str(e)) from None
    if st is not None:
        _refuse_existing(path, st, force)
    if not os.path.isdir(d):
        raise _say(path, f"no such directory {d}")
    if not os.access(d, os.W_OK | os.X_OK):
        raise _say(path, "permission denied")


def _create(path: str) -> int:
    fd = os.open(path, _NEW, MODE)
    try:
        os.fchmod(fd, MODE)  # the umask may have taken bits off; 0600 is the promise
    except OSError:
        pass
    return fd


def _beside(path: str) -> tuple[int, str]:
    """A fresh file in ``path``'s directory (O_EXCL, O_NOFOLLOW, 0600), and its name."""
    d, base = os.path.split(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".sattui-tmp", dir=d)
    try:
        os.fchmod(fd, MODE)
    except OSError:
        pass
    return fd, tmp


def _existing(path: str, force: bool) -> None:
    """``path`` exists (O_EXCL said so): raise unless it may be replaced."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return  # gone again: the caller creates it afresh
    _refuse_existing(path, st, force)


def open_output(path: str, force: bool = False) -> int:
    """A file descriptor open for writing a new file at ``path`` (mode 0600).

    Without ``force`` an existing file is refused; with it, a regular file is replaced
    by a new one renamed over it at once (the old file's contents are never touched).
    Raises :class:`OutputError` (one line) on any refusal or failure.
    """
    for _ in range(3):  # a file appearing or vanishing in between: look again
        try:
            return _create(path)
        except FileExistsError:
            pass
        except OSError as e:
            if e.errno == errno.ELOOP:  # O_NOFOLLOW met a link
                _existing(path, force)
            raise _say(path, e.strerror or str(e)) from None
        _existing(path, force)
        if not os.path.lexists(path):
            continue
        try:
            fd, tmp = _beside(path)
        except OSError as e:
            raise _say(path, e.strerror or str(e)) from None
        try:
            os.rename(tmp, path)
        except OSError as e:
            os.close(fd)
            _unlink_quietly(tmp)
            raise _say(path, f"cannot replace it: {e.strerror or e}") from None
        return fd
    raise _say(path, "it keeps changing under sattui; choose another path")


def write_file(path: str, data: str | bytes, force: bool = False) -> None:
    """Write a whole file at ``path``: created new (O_EXCL), or, with ``force``, written
    complete beside the old one and renamed over it."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    for _ in range(3):
        try:
            fd = _create(path)
        except FileExistsError:
            _existing(path, force)
            if not os.path.lexists(path):
                continue
            _replace_whole(path, raw)
            return
        except OSError as e:
            if e.errno == errno.ELOOP:
                _existing(path, force)
            raise _say(path, e.strerror or str(e)) from None
        _write_all(path, fd, raw)
        return
    raise _say(path, "it keeps changing under sattui; choose another path")


def _write_all(path: str, fd: int, raw: bytes) -> None:
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
    except OSError as e:
        raise _say(path, e.strerror or str(e)) from None


def _replace_whole(path: str, raw: bytes) -> None:
    try:
        fd, tmp = _beside(path)
    except OSError as e:
        raise _say(path, e.strerror or str(e)) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, path)
    except OSError as e:
        _unlink_quietly(tmp)
        raise _say(path, e.strerror or str(e)) from None


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


__all__ = ["FORCE_FLAG", "MODE", "OutputError", "check_output", "open_output", "write_file"]
