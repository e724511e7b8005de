"""Which ``xpu-smi`` is this? Kunlunxin and Intel both ship a tool of that name.

It is told by what the tool prints, never by its name or folder, and both backends
(kunlun, intel) ask this one function, so exactly one of them claims a given tool:

* Kunlunxin, drivers ≥ 5: an nvidia-smi-like table ("XPU-SMI  Driver Version …
  XPU-RT Version", "XPU-Util", "P800").
* Kunlunxin, 4.x drivers: version lines, then boxes ("Runtime Version: 4.33",
  "Product Brand: KUNLUNXIN", "| DevID | PCI Addr | Model |").
* Intel XPU Manager: JSON (``discovery -j``), "Intel(R)", "Level Zero", a "CLI:" block
  (``-v``) or a "| Device ID |" table.
"""

from __future__ import annotations

import json
import re

KUNLUN = "kunlun"
INTEL = "intel"

_KUNLUN_RE = re.compile(r"(?i:kunlun)|XPU-RT Version|XPU-SMI\s+Driver Version|XPU-Util|\bP800\b|\bR[23]00\b"
                        r"|^Runtime Version:|^\|\s*DevID\s*\|", re.M)
_INTEL_RE = re.compile(r'"device_list"|Intel\(R\)|\bIntel\b|Level Zero|XPU Manager|^\s*CLI:\s*$|^\|\s*Device ID\s*\|',
                       re.M)


def identify_xpu_smi(text: str) -> str | None:
    """"kunlun", "intel" or None (cannot tell) from anything an ``xpu-smi`` printed."""
    if not isinstance(text, str):
        return None
    if _KUNLUN_RE.search(text):
        return KUNLUN
    if _INTEL_RE.search(text):
        return INTEL
    s = text.strip()
    if s[:1] in ("{", "["):
        try:
            json.loads(s)
        except (ValueError, RecursionError):
            return None
        return INTEL  # Kunlunxin's tool prints no JSON
    return None
