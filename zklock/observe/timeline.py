"""The lock timeline: a Gantt-style picture of lock events (matplotlib).

One row per object; a bar for each hold, from grant to release (or loss),
coloured by job, solid for X and light for S; a lease is a hold of its holder, from its
grant to its drop (or the end it was granted with); an ``x`` in the denied job's colour
where a request for the object was denied, and a red triangle where a hold was lost.
Built from the JSON lines of ``event_log`` (see :mod:`zklock.observe.events`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Optional


@dataclass
class Hold:
    object: str
    mode: str
    job: str
    start_ms: int
    end_ms: int
    lost: bool = False


@dataclass
class Mark:
    object: str
    ts_ms: int
    kind: str  # denial | loss
    job: str


def build(events: Iterable[dict[str, Any]], since_ms: Optional[int] = None,
          prefix: Optional[str] = None) -> tuple[list[Hold], list[Mark]]:
    """Holds and marks from events (in time order), filtered by time and object prefix."""
    events = sorted(events, key=lambda e: e.get("ts", 0))
    last = events[-1]["ts"] if events else 0
    open_sets: dict[tuple[Any, str], dict[str, Any]] = {}
    holds: list[Hold] = []
    marks: list[Mark] = []
    for e in events:
        set_id = str(e.get("set", ""))
        # a lease is named by its id (any process may drop it); a set by its process too
        kind, key = e["event"], (set_id if set_id.startswith("lease:") else (e.get("pid"),
                                                                            set_id))
        if kind == "grant":
            open_sets[key] = e
        elif kind in ("release", "loss") and key in open_sets:
            g = open_sets.pop(key)
            for obj, mode in g.get("locks", []):
                holds.append(Hold(obj, mode, _who(g), g["ts"], e["ts"], lost=kind == "loss"))
            if kind == "loss":
                marks += [Mark(obj, e["ts"], "loss", _who(g)) for obj, _ in g.get("locks", [])]
        elif kind == "denial":
            marks += [Mark(b["object"], e["ts"], "denial", e.get("job", "?"))
                      for b in e.get("blockers", [])]
    for g in open_sets.values():  # still held when the log ends (a lease: until its end)
        end = g["until"] if g.get("lease") and g.get("until") else last
        for obj, mode in g.get("locks", []):
            holds.append(Hold(obj, mode, _who(g), g["ts"], end))

    def keep(obj: str, end: int) -> bool:
        return (prefix is None or obj == prefix or obj.startswith(prefix + ".")
                or obj.startswith(prefix + "/")) and (since_ms is None or end >= since_ms)
    holds = [h for h in holds if keep(h.object, h.end_ms)]
    marks = [m for m in marks if keep(m.object, m.ts_ms)]
    return holds, marks


def _who(grant: dict[str, Any]) -> str:
    """Whose hold a grant starts: a lease's holder, else the job of the process."""
    return str(grant.get("holder") or grant.get("job", "?"))


def _lanes(holds: list[Hold]) -> tuple[dict[int, int], dict[str, int]]:
    """Lane of each hold within its object's row (greedy interval partitioning)."""
    lane: dict[int, int] = {}
    lanes: dict[str, int] = {}
    by_object: dict[str, list[Hold]] = {}
    for h in holds:
        by_object.setdefault(h.object, []).append(h)
    for obj, items in by_object.items():
        ends: list[int] = []
        for h in sorted(items, key=lambda x: x.start_ms):
            for i, end in enumerate(ends):
                if end <= h.start_ms:
                    ends[i] = h.end_ms
                    lane[id(h)] = i
                    break
            else:
                ends.append(h.end_ms)
                lane[id(h)] = len(ends) - 1
        lanes[obj] = max(1, len(ends))
    return lane, lanes


def draw(holds: list[Hold], marks: list[Mark], out: str, title: str = "zklock locks") -> str:
    """Write the picture to ``out`` (PNG, SVG or PDF by extension); returns ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    objects = sorted({h.object for h in holds} | {m.object for m in marks})
    if not objects:
        raise ValueError("no lock events to draw (is event_log set, and --since wide enough?)")
    row = {o: i for i, o in enumerate(objects)}
    t0 = min([h.start_ms for h in holds] + [m.ts_ms for m in marks])
    jobs = sorted({h.job for h in holds} | {m.job for m in marks})
    palette = plt.get_cmap("tab10")
    colour = {j: palette(i % 10) for i, j in enumerate(jobs)}
    height = max(3.0, 0.42 * len(objects) + 1.6)
    fig, ax = plt.subplots(figsize=(12, height))
    lane, lanes = _lanes(holds)
    for h in holds:
        n = lanes[h.object]
        band = 0.8 / n  # overlapping holds of one object side by side, not on top
        y = row[h.object] - 0.4 + band * (lane[id(h)] + 0.5)
        width = max((h.end_ms - h.start_ms) / 1000, 0.05)
        solid = h.mode == "X"
        ax.barh(y, width, left=(h.start_ms - t0) / 1000, height=band * 0.9,
                color=colour[h.job], alpha=0.95 if solid else 0.5,
                edgecolor="black" if solid else "none", linewidth=0.6)
    denials = [m for m in marks if m.kind == "denial"]
    if denials:  # in the colour of the job whose request was denied
        ax.scatter([(m.ts_ms - t0) / 1000 for m in denials], [row[m.object] for m in denials],
                   marker="x", s=44, linewidths=2, zorder=3, label="denial (its job's colour)",
                   c=[colour[m.job] for m in denials])
    losses = [m for m in marks if m.kind == "loss"]
    if losses:
        ax.scatter([(m.ts_ms - t0) / 1000 for m in losses], [row[m.object] for m in losses],
                   marker="v", color="red", s=70, zorder=3, label="loss")
    for y in range(len(objects) - 1):
        ax.axhline(y + 0.5, color="grey", linewidth=0.4, alpha=0.5)
    ax.set_yticks(range(len(objects)))
    ax.set_yticklabels(objects, fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the first event")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    handles = [Patch(color=colour[j], label=j) for j in jobs]
    handles += [Patch(facecolor="grey", edgecolor="black", label="X (exclusive)"),
                Patch(facecolor="grey", alpha=0.45, label="S (shared)")]
    scatter_handles, _ = ax.get_legend_handles_labels()
    ax.legend(handles=handles + scatter_handles, loc="upper left", bbox_to_anchor=(1.01, 1),
              fontsize=8, title="job / mode / marks", title_fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
