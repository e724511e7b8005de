"""Output files (sattui/safefile.py): never through a planted link, never over a file
unasked, mode 0600; a replacement is written beside the old file and renamed over it."""

from __future__ import annotations

import os
import stat

import pytest

from sattui.safefile import OutputError, check_output, open_output, write_file


def _mode(p) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


@pytest.fixture
def victim(tmp_path):
    """A file another user wants root to overwrite."""
    v = tmp_path / "victim"
    v.write_text("precious\n")
    os.chmod(v, 0o644)
    return v


def _untouched(v) -> None:
    assert v.read_text() == "precious\n" and _mode(v) == 0o644


def _write_via_fd(path, force=False, data=b"new\n"):
    fd = open_output(str(path), force)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def test_new_file_has_mode_0600_whatever_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        _write_via_fd(tmp_path / "a")
        write_file(str(tmp_path / "b"), "x")
    finally:
        os.umask(old)
    old = os.umask(0o277)  # even a umask that takes the owner's write bit
    try:
        _write_via_fd(tmp_path / "c")
    finally:
        os.umask(old)
    assert [_mode(tmp_path / n) for n in "abc"] == [0o600] * 3
    assert (tmp_path / "c").read_bytes() == b"new\n"


@pytest.mark.parametrize("force", [False, True])
@pytest.mark.parametrize("writer", ["open_output", "write_file", "check_output"])
def test_a_symlink_is_never_followed_nor_replaced(tmp_path, victim, writer, force):
    link = tmp_path / "run.jsonl"
    link.symlink_to(victim)
    with pytest.raises(OutputError, match="symbolic link; sattui never writes through one"):
        {"open_output": lambda: _write_via_fd(link, force),
         "write_file": lambda: write_file(str(link), "new\n", force),
         "check_output": lambda: check_output(str(link), force)}[writer]()
    _untouched(victim)
    assert link.is_symlink() and os.readlink(link) == str(victim)


@pytest.mark.parametrize("force", [False, True])
def test_a_dangling_symlink_does_not_create_its_target(tmp_path, force):
    # `ln -s /etc/cron.d/evil /tmp/run.jsonl`: O_CREAT alone would create the target.
    target = tmp_path / "cron.d-evil"
    link = tmp_path / "run.jsonl"
    link.symlink_to(target)
    with pytest.raises(OutputError, match="symbolic link"):
        _write_via_fd(link, force)
    with pytest.raises(OutputError, match="symbolic link"):
        write_file(str(link), "x", force)
    assert not target.exists()


@pytest.mark.parametrize("writer", ["open_output", "write_file", "check_output"])
def test_an_existing_file_is_refused_naming_the_flag(tmp_path, writer):
    p = tmp_path / "run.jsonl"
    p.write_text("old\n")
    with pytest.raises(OutputError) as e:
        {"open_output": lambda: _write_via_fd(p),
         "write_file": lambda: write_file(str(p), "new\n"),
         "check_output": lambda: check_output(str(p))}[writer]()
    assert str(e.value) == f"cannot write {p}: the file exists; pass --force to replace it"
    assert p.read_text() == "old\n"


@pytest.mark.parametrize("writer", ["open_output", "write_file"])
def test_force_replaces_a_regular_file_by_a_new_one_renamed_over_it(tmp_path, victim, writer):
    # A hard link to the victim stands at the path: the old inode must keep its bytes.
    p = tmp_path / "run.jsonl"
    os.link(victim, p)
    check_output(str(p), force=True)
    if writer == "open_output":
        _write_via_fd(p, force=True)
    else:
        write_file(str(p), b"new\n", force=True)
    assert p.read_bytes() == b"new\n" and _mode(p) == 0o600
    assert os.lstat(p).st_ino != os.lstat(victim).st_ino
    _untouched(victim)
    assert sorted(os.listdir(tmp_path)) == ["run.jsonl", "victim"]  # no temporary file left


def test_a_forced_stream_is_live_under_its_name_from_the_start(tmp_path):
    # Whatever stops sattui, the file under the name holds what was written so far.
    p = tmp_path / "run.jsonl"
    p.write_text("old recording\n")
    fd = open_output(str(p), force=True)
    try:
        os.write(fd, b"first record\n")
        assert p.read_bytes() == b"first record\n"
    finally:
        os.close(fd)


@pytest.mark.parametrize("force", [False, True])
def test_directories_fifos_and_devices_are_never_replaced(tmp_path, force):
    d = tmp_path / "dir"
    d.mkdir()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="is a directory"):
        _write_via_fd(d, force)
    with pytest.raises(OutputError, match="not a regular file"):
        _write_via_fd(fifo, force)  # would block forever opening a FIFO nobody reads
    with pytest.raises(OutputError, match="not a regular file"):
        write_file("/dev/null", "x", force)
    assert d.is_dir() and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_missing_directory_is_one_line(tmp_path):
    p = tmp_path / "no" / "run.jsonl"
    with pytest.raises(OutputError, match=f"cannot write {p}: no such directory"):
        check_output(str(p))
    with pytest.raises(OutputError, match=f"cannot write {p}: No such file or directory"):
        _write_via_fd(p)
