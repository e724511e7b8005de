"""The status header's lines, as text and style names (no Textual here): trainer, uptime,
backend, sampler, verdict, and every degraded state; and :class:`ViewState`, what the app
adds to a redraw's data (zoom, pause, replay controls). ``widgets/header.py`` draws them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sattui.sampler_status import SamplerStatus
from sattui.textsafe import clean, clean_argv
from sattui.view import fmt
from sattui.view.data import ViewData
from sattui.view.lines import Run, fit

MAX_PROBLEM_LINES = 3


@dataclass(frozen=True, slots=True)
class ViewState:
    """What the app adds to the data: the zoom, pause and replay controls."""

    window_s: float
    paused: bool = False
    replay: bool = False
    playing: bool = False
    duration: float | None = None
    show_clock: bool = True


def sampler_runs(data: ViewData) -> list[Run]:
    if data.header.get("remote"):
        # sattui cluster's host: its node's sattui sampled it; this one reads Prometheus.
        return [("via Prometheus", "dim")]
    st = data.status
    sampler = st.sampler if st is not None else None
    rate = st.sampler_rate_hz if st is not None else None
    if sampler == SamplerStatus.SAMPLING or (sampler is None and rate is not None):
        if rate is None:
            r = data.header.get("stack_rate_hz")
            rate = float(r) if isinstance(r, (int, float)) else None
        return [("py-spy ", "dim"), (f"{rate:g} Hz" if rate is not None else "on", "value")]
    if sampler is not None:
        return [("py-spy ", "dim"), (sampler.word, sampler.loudness)]
    if data.header.get("pid") is None:
        return [("cards only", "dim")]
    return [("no stacks", "warn")]


def found_trainers(data: ViewData) -> list[dict]:
    """The trainers found below a launcher that are still running at ``t_end``, by rank
    (``trainer_found`` events; one that exited is replaced by the next one found)."""
    found: dict[int, dict] = {}
    for ev in data.events:
        pid = ev.data.get("pid")
        if ev.type == "trainer_found" and isinstance(pid, int):
            found[pid] = ev.data
        elif ev.type == "proc_exited" and pid in found:
            del found[pid]
    return sorted(found.values(), key=lambda d: (d.get("rank") is None, d.get("rank") or 0, d.get("pid") or 0))


def header_lines(data: ViewData, view: ViewState, width: int) -> list[list[Run]]:
    h = data.header
    st = data.status
    remote = h.get("remote")  # sattui cluster's host: no local process, no uptime of ours
    # line 1: who, then (right-aligned) when, which backend, how stacks are sampled
    right: list[Run] = []
    if view.replay:
        right += [("replay ", "dim"), (f"{fmt.clock(data.t_end)}/{fmt.clock(view.duration or 0)}", "value"),
                  (" ▶ playing" if view.playing else " stopped", "value" if view.playing else "dim")]
    elif view.show_clock and not remote:
        right += [("up ", "dim"), (fmt.duration(data.t_end), "value")]
    if data.rank_label is not None:
        # A multi-rank job: which rank the stacks and workers screens show (r picks).
        right += [("  ", ""), (data.rank_label, "value" if data.rank_pid is not None else "dim")]
    backend = (st.backend if st is not None else None) or h.get("backend")
    right += [("  ", ""), (backend or "no backend", "value" if backend else "warn"), ("  ", "")]
    right += sampler_runs(data)
    right_len = sum(len(t) for t, _ in right)
    pid = h.get("pid")
    cmd = h.get("cmdline")
    if remote:
        who = clean(str(remote))
    elif pid is not None:
        if isinstance(cmd, list) and cmd:
            # /root/.pyenv/versions/3.11.7/bin/python → python: the room is for the arguments.
            cmd = [os.path.basename(cmd[0]) or cmd[0], *cmd[1:]]
        # Escaped before it is cut, so the cut counts what is shown.
        who = f"pid {pid} " + (clean_argv(cmd) if isinstance(cmd, list) else clean(cmd or ""))
        found = found_trainers(data)
        if found:
            # Under a launcher: the trainer(s) found below it, and what they are under.
            f = found[0]
            fcmd = f.get("cmdline")
            fcmd = [os.path.basename(fcmd[0]) or fcmd[0], *fcmd[1:]] if isinstance(fcmd, list) and fcmd else []
            rank = f"rank {f['rank']} " if f.get("rank") is not None else ""
            more = f" +{len(found) - 1} more" if len(found) > 1 else ""
            # "under …" first: a long command line is cut at the right edge
            who = (f"{rank}pid {f.get('pid')}{more} (under {clean(h.get('launcher') or f.get('launcher'))} "
                   f"pid {pid}) {clean_argv(map(str, fcmd))}")
        elif h.get("launcher") and st is not None and st.sampler == SamplerStatus.STARTING:
            who += f"  ({clean(h.get('launcher'))}: looking for the trainer below it)"
    else:
        who = "no trainer (cards only)"
    room = max(8, width - right_len - 2)
    line1: list[Run] = [(fit(who, room).ljust(room), "title"), ("  ", "")] + right
    lines = [line1]

    # line 2: the advisor's verdict
    v = data.verdict
    if v is None:
        lines.append([("verdict ", "dim"), ("no findings yet", "dim")])
    else:
        sev = v.severity.value
        summary = v.summary or v.rule
        sure = v.impact_text() if v.impact_ci is not None else f"{v.impact:.0%}"
        held = f", {v.since_s:.0f} s in" if v.since_s is not None and v.impact_ci is not None else ""
        tail = f" (impact {sure}{held})" if v.severity.at_least("medium") and sure not in summary else ""
        name = v.rule
        if v.rule == "no_data" and ":" in summary:
            # what it is doing while no verdict stands ("judging: data wait leads, 62–91 %
            # after 4 s", "collecting: …"), in its own word rather than "no_data"
            name, summary = (x.strip() for x in summary.split(":", 1))
        lines.append([(f" {sev.upper()} ", sev), (" ", ""), (name, "value"), (": ", "dim"),
                      (fit(summary + tail, max(10, width - len(sev) - len(name) - 6)), "")])

    # degraded states, plainly, one line each
    probs: list[list[Run]] = []
    said: set[str] = set()  # event types a status line below already covers
    if view.paused:
        probs.append([(" PAUSED ", "paused"), (" the view is frozen; sampling goes on.  p: follow again", "dim")])
    if st is not None and st.backend is None and data.live:
        why = (st.backend_message or "no backend could start").removeprefix("no accelerator found: ")
        # Auto-detection's reason lists every backend: one line here, whole in `sattui doctor`.
        probs.append(_fit_runs([("no accelerator found", "warn"), (": " + why, "dim")], width))
        said.add("no_accelerator")
    elif st is not None and st.backend is not None and st.backend_message and data.live:
        probs.append([("card backend failing", "bad"), (": " + st.backend_message, "dim")])
        said.add("backend_failing")
    if st is not None and st.sampler is not None and st.sampler.problem is not None:
        probs.append([(st.sampler.problem, st.sampler.loudness),
                      (": " + st.sampler_message if st.sampler_message else "", "dim")])
        if st.sampler.event is not None:
            said.add(st.sampler.event)
    ex = data.trainer_exit
    if ex is not None:
        code = ex.get("exit_code")
        probs.append([("trainer exited", "warn"),
                      (f" (exit code {code})" if code is not None else "", "value"),
                      (" — showing the last data", "dim")])
    for typ, d in data.problems:
        if typ in said:
            continue  # already said above, from the session's status
        style = "bad" if typ in ("card_lost", "permission_denied", "backend_failing") else "warn"
        if typ == "no_accelerator":
            why = str(d.get("message") or "").removeprefix("no accelerator found: ")
            probs.append(_fit_runs([("no accelerator found", style), (": " + why, "dim")], width))
            continue
        probs.append([(typ.replace("_", " "), style), (": " + str(d.get("message") or ""), "dim")])
    if len(probs) > MAX_PROBLEM_LINES:
        extra = len(probs) - MAX_PROBLEM_LINES + 1
        probs = probs[: MAX_PROBLEM_LINES - 1] + [[(f"+{extra} more notices (see ? help / report)", "dim")]]
    return lines + probs


def _fit_runs(runs: list[Run], width: int) -> list[Run]:
    out: list[Run] = []
    left = max(1, width)
    for text_, style in runs:
        if left <= 0:
            break
        if len(text_) > left:
            out.append((text_[: max(0, left - 1)] + "…", style))
            break
        out.append((text_, style))
        left -= len(text_)
    return out
