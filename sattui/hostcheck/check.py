"""One check's result, and the helpers every check uses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# ok: nothing to fix; warn: likely to cost throughput; fail: sattui or the trainer
# cannot work this way; info: nothing to judge (absent here, not applicable).
STATUSES = ("ok", "warn", "fail", "info")

MIB = 1024 * 1024


@dataclass
class Check:
    id: str
    status: str
    summary: str  # one line
    fix: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown check status {self.status!r}")

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "status": self.status, "summary": self.summary, "fix": self.fix,
                "details": self.details}


def read_text(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None


def mib(n: float | None) -> str:
    if n is None:
        return "?"
    if n >= 10 * 1024 * MIB:
        return f"{n / (1024 * MIB):.0f} GiB"
    if n >= 1024 * MIB:
        return f"{n / (1024 * MIB):.1f} GiB"
    return f"{n / MIB:.0f} MiB" if n >= 10 * MIB else f"{n / MIB:.1f} MiB"
