"""What a DataLoader worker is doing, from one stack of its main thread (pure).

``/proc`` says a worker sleeps; it cannot say why. The worker's own stack can
(issue 10, item 2): its main thread runs torch's ``_worker_loop``
(``torch/utils/data/_utils/worker.py``), which takes an index from ``index_queue``,
fetches that item through ``torch/utils/data/_utils/fetch.py`` (the Dataset's
``__getitem__`` or the IterableDataset's iterator, then the collate function in
``collate.py``) and puts the batch on the result queue.

States, decided in this order:

``idle``           inside ``_worker_loop``, in the index queue's ``get``
                   (``multiprocessing/queues.py``) and not fetching: the worker has
                   nothing to do, it waits for the main process to ask for a batch;
``fetch_wait``     fetching (a ``fetch.py``/``collate.py`` frame or a ``__getitem__``
                   below the loop) with the thread off the CPU: asleep in ``read``,
                   ``recv``, ``select``, ``time.sleep``, a lock, a disk read (``D``)
                   — it waits on its data;
``fetch_compute``  fetching with the thread on a CPU (``R``): decoding, augmenting,
                   collating;
``other``          anything else: not in the loop yet (a spawned worker importing,
                   ``worker_init_fn`` runs inside the loop but before any fetch),
                   between two items, or a stack py-spy could not read whole.

On or off the CPU is py-spy's ``active`` flag of the thread (its ``/proc`` state is
``R``), read in the same instant as the stack. A C function (``time.sleep``,
``socket.recv``, a JPEG decoder) is not a Python frame, so the innermost Python frame
alone cannot tell a worker that sleeps from one that decodes; the flag can. Where a
dump gives no flag, a fetch whose innermost frame is in a waiting library (``socket``,
``ssl``, ``selectors``, ``http.client``, ``urllib``, ``requests``, ``threading`` waits …)
or whose innermost source line calls ``sleep(``, ``recv(``, ``.read(`` … is
``fetch_wait``, any other fetch ``fetch_compute``.

py-spy reads the flag and the stack a moment apart (nonblocking), so now and then one
dump of a computing worker says "off the CPU" (1 of 5 in the ``compute`` capture of
tests/fixtures/worker_stacks/): a state is one look, the share over many looks is the
signal.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

from sattui.frames import norm_path
from sattui.model import Frame

# The innermost frames a worker_stack record keeps (below the worker loop).
MAX_FRAMES = 6

_WORKER_PY = "torch/utils/data/_utils/worker.py"
_FETCH_PY = ("torch/utils/data/_utils/fetch.py", "torch/utils/data/_utils/collate.py")
_QUEUES_PY = "multiprocessing/queues.py"
_ITEM_METHODS = ("__getitem__", "__getitems__")
# Library files whose frames, innermost in a fetch, mean the worker waits on something.
_WAITING_FILES = ("socket.py", "ssl.py", "selectors.py", "http/client.py", "urllib/request.py",
                  "subprocess.py", "multiprocessing/connection.py", "queue.py")
_WAITING_DIRS = ("/urllib3/", "/requests/", "/botocore/", "/aiohttp/", "/grpc/")
_WAITING_NAMES = ("Condition.wait", "Event.wait", "Thread.join", "Lock.acquire")
# Calls of C functions that block, as written on the innermost source line.
_WAITING_CALLS = ("sleep(", "recv(", "recv_into(", ".read(", "readinto(", "select(", "poll(", "urlopen(",
                  "requests.", ".acquire(", ".wait(")


class WorkerState(str, Enum):
    IDLE = "idle"
    FETCH_WAIT = "fetch_wait"
    FETCH_COMPUTE = "fetch_compute"
    OTHER = "other"

    def __str__(self) -> str:
        return self.value


def _path(f: Frame) -> str:
    return "/" + norm_path(f.filename).lstrip("/")


def _in(f: Frame, suffix: str) -> bool:
    return _path(f).endswith("/" + suffix)


def loop_index(frames: tuple[Frame, ...] | list[Frame]) -> int | None:
    """Index (innermost first) of the worker loop's frame, or None outside it."""
    for i, f in enumerate(frames):
        if f.name == "_worker_loop" and _in(f, _WORKER_PY):
            return i
    return None


def _fetching(inner: tuple[Frame, ...] | list[Frame]) -> bool:
    return any(f.name.rsplit(".", 1)[-1] in _ITEM_METHODS or any(_in(f, p) for p in _FETCH_PY) for f in inner)


def _waiting_frame(f: Frame) -> bool:
    path = _path(f)
    return (any(path.endswith("/" + p) for p in _WAITING_FILES) or any(d in path for d in _WAITING_DIRS)
            or f.name in _WAITING_NAMES)


def _waiting_line(f: Frame, source_line: Callable[[str, int], str | None] | None) -> bool:
    if source_line is None or f.line is None:
        return False
    text = source_line(f.filename, f.line) or ""
    return any(tok in text for tok in _WAITING_CALLS)


def classify_worker(frames: tuple[Frame, ...] | list[Frame], active: bool | None,
                    source_line: Callable[[str, int], str | None] | None = None) -> WorkerState:
    """The state of a worker whose main thread holds ``frames`` (innermost first);
    ``active``: the thread was on a CPU (None: not known). ``source_line(file, line)``
    (``sattui.frames.read_source_line``) is asked only without ``active``: the innermost
    line calling ``sleep(``, ``recv(``, ``.read(`` … then means a wait."""
    i = loop_index(frames)
    if i is None:
        return WorkerState.OTHER
    inner = frames[:i]
    if _fetching(inner):
        if active is None:
            waiting = bool(inner) and (_waiting_frame(inner[0]) or _waiting_line(inner[0], source_line))
            return WorkerState.FETCH_WAIT if waiting else WorkerState.FETCH_COMPUTE
        return WorkerState.FETCH_COMPUTE if active else WorkerState.FETCH_WAIT
    if any(f.name.rsplit(".", 1)[-1] == "get" and _in(f, _QUEUES_PY) for f in inner):
        return WorkerState.IDLE
    return WorkerState.OTHER


def kept_frames(frames: tuple[Frame, ...] | list[Frame]) -> tuple[Frame, ...]:
    """The frames a record keeps: the innermost below the worker loop (or of the whole
    stack outside it), at most ``MAX_FRAMES``."""
    i = loop_index(frames)
    inner = frames[:i] if i else frames
    return tuple(inner[:MAX_FRAMES])
