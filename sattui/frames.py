"""Python frames as people read them: the trainer's own code or a library, a short path,
one label, the source line.

Shared by the classifier (sattui/trainer/classifier.py), the advisor's evidence, the
report and the stacks screen, so a frame reads the same everywhere. Pure, apart from
:func:`read_source_line`, which reads files through ``linecache``.
"""

from __future__ import annotations

import functools
import linecache
import re
import sys

from sattui.model import Frame

_STDLIB_DIR = re.compile(r"/lib(?:64)?/python\d+(?:\.\d+)?t?/")
_LIB_DIRS = ("/site-packages/", "/dist-packages/")
# py-spy's default (short) filenames drop the sys.path prefix, so "torch/nn/..." and
# "threading.py" no longer say where they live: recognise common libraries by top package.
_KNOWN_LIBS = frozenset({
    "torch", "torchvision", "torchaudio", "torchtext", "functorch", "triton", "numpy", "scipy",
    "pandas", "PIL", "cv2", "sympy", "jinja2", "transformers", "accelerate", "datasets",
    "tokenizers", "safetensors", "huggingface_hub", "lightning", "pytorch_lightning",
    "lightning_fabric", "deepspeed", "timm", "wandb", "tensorboard", "tensorboardX", "mlflow",
    "tqdm", "absl", "google", "apex", "xformers", "flash_attn", "einops", "fsspec",
})


def norm_path(filename: str) -> str:
    return filename.replace("\\", "/")


@functools.lru_cache(maxsize=1 << 14)
def is_user_frame(filename: str) -> bool:
    """True for the trainer's own code: not a library, the stdlib, a pseudo-file
    (``<frozen …>``, ``<string>``) or an inductor-generated module."""
    path = norm_path(filename)
    if not path or path.startswith("<") or "torchinductor_" in path:
        return False
    if any(d in path for d in _LIB_DIRS) or path.startswith(("site-packages/", "dist-packages/")):
        return False
    if path.startswith("/"):
        return not _STDLIB_DIR.search(path)
    top = path.split("/", 1)[0].removesuffix(".py")
    return top not in sys.stdlib_module_names and top not in _KNOWN_LIBS


@functools.lru_cache(maxsize=1 << 14)
def short_path(filename: str) -> str:
    """Enough of a path to find the file, short enough to read: a library's path inside
    its ``site-packages`` (``torch/optim/sgd.py``), the stdlib's inside its
    ``lib/pythonX.Y`` (``selectors.py``), else the last two components (``u/train.py``)."""
    norm = norm_path(filename)
    for marker in _LIB_DIRS:
        if marker in norm:
            return norm.rsplit(marker, 1)[1]
    m = _STDLIB_DIR.search(norm)
    if m:
        return norm[m.end():]
    parts = norm.rsplit("/", 2)
    return "/".join(parts[-2:]) if len(parts) > 2 else norm


@functools.lru_cache(maxsize=1 << 14)
def frame_label(f: Frame) -> str:
    """``name (short/path.py:line)``: the one way a frame is written on screen and in reports.
    Cached: a training loop repeats the same few hundred frames."""
    where = short_path(f.filename)
    return f"{f.name} ({where}:{f.line})" if f.line is not None else f"{f.name} ({where})"


def user_frame(frames: tuple[Frame, ...] | list[Frame]) -> Frame | None:
    """The innermost frame in the user's own code (where they would change something)."""
    for f in frames:
        if is_user_frame(f.filename):
            return f
    return None


@functools.lru_cache(maxsize=8192)
def read_source_line(filename: str, line: int) -> str | None:
    """The stripped source text at ``filename:line`` via linecache, or None; never raises.

    Cached per (file, line) for the life of the process: the trainer's source does not
    change under a run, and stacks repeat. Pass absolute filenames (py-spy
    ``--full-filenames`` or ``dump --json``'s ``filename``): a short one is looked up on
    *this* process's sys.path.
    """
    try:
        if not filename or filename.startswith("<") or line is None or line < 1:
            return None
        text = linecache.getline(filename, line).strip()
    except Exception:  # unreadable, binary, vanished: no line, never an error
        return None
    return text or None
