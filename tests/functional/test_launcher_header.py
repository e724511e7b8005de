"""The header under a launcher: which process was taken as the trainer, and why."""

from __future__ import annotations

from sattui.recording import RecordingReader
from tests.functional.conftest import FIXTURE, header_text, settle
from tests.functional.doubles import FrozenLive, status
from tests.functional.test_app import SIZE, app_for

WRAPPER = 100


def _found(pid: int, cmdline: list[str], rank=None, t: float = 1.0) -> dict:
    return {"kind": "event", "t": t, "type": "trainer_found", "pid": pid, "rank": rank, "under": WRAPPER,
            "launcher": "bash", "reason": "libtorch_cpu.so loaded", "cmdline": cmdline,
            "message": f"trainer: pid {pid} (…), found under bash pid {WRAPPER}: libtorch_cpu.so loaded"}


def _header() -> dict:
    h = dict(RecordingReader(str(FIXTURE)).header)
    h.update(pid=WRAPPER, cmdline=["bash", "train.sh"], launcher="bash")
    return h


async def test_the_trainer_found_below_a_shell_is_named_with_its_launcher():
    live = FrozenLive(str(FIXTURE), 90.0, status(), header=_header(),
                      extra=[_found(4242, ["/usr/bin/python3", "train.py", "--epochs", "3"])])
    app = app_for(live)
    async with app.run_test(size=(120, 24)) as pilot:
        await settle(pilot)
        first = header_text(app).splitlines()[0]
        assert first.startswith("pid 4242 (under bash pid 100) python3 train.py --epochs 3"), first


async def test_ranks_found_below_a_launcher_and_one_that_exited():
    extra = [_found(4300, ["python", "train.py"], rank=1), _found(4242, ["python", "train.py"], rank=0),
             _found(4999, ["python", "old.py"], t=0.5),
             {"kind": "event", "t": 0.8, "type": "proc_exited", "message": "main 4999 exited", "pid": 4999,
              "role": "main"}]
    live = FrozenLive(str(FIXTURE), 90.0, status(), header=_header(), extra=extra)
    app = app_for(live)
    async with app.run_test(size=(120, 24)) as pilot:
        await settle(pilot)
        first = header_text(app).splitlines()[0]
        assert first.startswith("rank 0 pid 4242 +1 more (under bash pid 100) python train.py"), first


async def test_control_characters_of_a_command_line_never_reach_the_screen():
    live = FrozenLive(str(FIXTURE), 90.0, status(), header=_header(),
                      extra=[_found(4242, ["python", "x\x1b[2J\x07.py"])])
    app = app_for(live)
    async with app.run_test(size=(120, 24)) as pilot:
        await settle(pilot)
        head = header_text(app)
        assert "\x1b" not in head and "\x07" not in head
        assert "x\\x1b[2J\\x07.py" in head


async def test_a_shell_with_no_trainer_below_it_yet_says_so():
    msg = ("pid 100 (bash) is not a Python process: looking below it for the trainer (a Python process with "
           "torch loaded, a rank, or one owning DataLoader workers)")
    live = FrozenLive(str(FIXTURE), 2.0, status(sampler="not_python", sampler_message=msg, sampler_rate_hz=None),
                      header=_header())
    app = app_for(live)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        head = header_text(app)
        assert head.splitlines()[0].startswith("pid 100 bash train.sh")
        assert "looking below it for the trainer" in head
