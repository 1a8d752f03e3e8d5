"""The claims `make demo` prints, each checked against the lock event log of the run.

The demo does not say what it hoped would happen: it says what the event log shows. Each
claim is a function of the run's events (:func:`zklock.observe.events.read_events`) that returns a
:class:`Claim`: the sentence, whether it held, and the figure that proves it (or the fact
that refutes it). ``python scripts/demo_claims.py EVENTS [EXPLAIN_JSON]`` checks a log
again and exits 1 when a claim does not hold.

Times come from the events' stamps: one host, one clock. A grant is stamped just after
its nodes were found free and a release just after its nodes were deleted, so a release
can be stamped a moment after the next holder's grant; :data:`STAMP_SLACK_MS` is that
moment, and a gap within it is no overlap.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zklock.observe.timeline import Hold, build  # noqa: E402

#: How far a release's stamp may trail the grant that followed it (see the module's text).
STAMP_SLACK_MS = 50
#: The demo's partitions: the backfill's and the ingest's.
BACKFILLED = "sales.orders/ds=2024-01-01"
INGESTED = ("sales.orders/ds=2024-01-03", "sales.orders/ds=2024-01-04",
            "sales.orders/ds=2024-01-05")
#: The scheduler's query ids: zklock-sq-<namespace>-<query>-<trigger ms>
SCHEDULED_PREFIX = "zklock-sq-demo-"


@dataclass(frozen=True)
class Claim:
    """One sentence of the demo's conclusion, and what the event log says of it."""

    text: str
    held: bool
    proof: str

    def line(self) -> str:
        return f"  [{'ok' if self.held else 'FAILED'}] {self.text}: {self.proof}"


def _holds(events: Sequence[dict[str, Any]], job: str, obj: str,
           mode: Optional[str] = None) -> list[Hold]:
    holds, _ = build(events)
    return sorted((h for h in holds if h.job == job and h.object == obj
                   and (mode is None or h.mode == mode)), key=lambda h: h.start_ms)


def _overlap_ms(a: Hold, b: Hold) -> int:
    return min(a.end_ms, b.end_ms) - max(a.start_ms, b.start_ms)


def _grants(events: Iterable[dict[str, Any]], job: str) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == "grant" and e.get("job") == job]


def _waited_s(events: Sequence[dict[str, Any]], job: str, obj: str) -> float:
    """How long ``job`` waited for its first grant that holds ``obj``."""
    for g in _grants(events, job):
        if any(o == obj for o, _ in g["locks"]):
            return g.get("wait_ms", 0) / 1000
    return 0.0


def writers_side_by_side(events: Sequence[dict[str, Any]]) -> Claim:
    """The backfill's X on its partition and the ingest's X on new partitions overlapped."""
    text = "the backfill and the ingest wrote different partitions of sales.orders at once"
    backfill = _holds(events, "backfill", BACKFILLED, "X")
    ingest = [h for obj in INGESTED for h in _holds(events, "ingest", obj, "X")]
    if not backfill or not ingest:
        return Claim(text, False, f"no X hold of the backfill on {BACKFILLED} or of the"
                                  " ingest on its partitions in the log")
    pairs = [(_overlap_ms(b, i), i) for b in backfill for i in ingest]
    overlapping = [(ms, i) for ms, i in pairs if ms > STAMP_SLACK_MS]
    if not overlapping:
        return Claim(text, False, "no X hold of the ingest overlapped the backfill's X on"
                                  f" {BACKFILLED}")
    total = sum(ms for ms, _ in overlapping) / 1000
    parts = ", ".join(i.object.split("/")[1] for _, i in overlapping)
    return Claim(text, True, f"the backfill's X on ds=2024-01-01 overlapped the ingest's X"
                             f" on {parts} for {total:.1f} s")


def writers_never_waited_for_each_other(events: Sequence[dict[str, Any]]) -> Claim:
    """No denial of the backfill or the ingest names the other as its blocker."""
    text = "the writers of different partitions never waited for each other"
    crossed = [e for e in events if e["event"] == "denial"
               and {e.get("job"), *(b.get("job") for b in e.get("blockers", []))}
               >= {"backfill", "ingest"}]
    denied = sum(1 for e in events if e["event"] == "denial" and e.get("job") == "ingest")
    if crossed:
        return Claim(text, False, f"{len(crossed)} denials of one by the other, the first on"
                                  f" {crossed[0]['blockers'][0]['object']}")
    return Claim(text, True, f"0 denials of either by the other ({denied} denials of the"
                             " ingest in all)")


def _after(events: Sequence[dict[str, Any]], text: str, first: str, then: str, obj: str,
           first_mode: str, then_mode: str) -> Claim:
    """``then``'s hold of ``obj`` began after every overlapping-mode hold of ``first``."""
    before = _holds(events, first, obj, first_mode)
    after = _holds(events, then, obj, then_mode)
    if not before or not after:
        return Claim(text, False, f"no {first_mode} hold of the {first} and {then_mode} hold"
                                  f" of the {then} on {obj} in the log")
    prior = [h for h in before if h.start_ms < after[0].start_ms]
    if not prior:
        return Claim(text, False, f"the {then}'s {then_mode} on {obj} began before the"
                                  f" {first}'s {first_mode}")
    gap_ms = after[0].start_ms - max(h.end_ms for h in prior)
    if gap_ms < -STAMP_SLACK_MS:
        return Claim(text, False, f"the {then}'s {then_mode} on {obj} began during the"
                                  f" {first}'s {first_mode}")
    return Claim(text, True, f"the {then} waited {_waited_s(events, then, obj):.1f} s; its"
                             f" {then_mode} on {obj} began {max(gap_ms, 0) / 1000:.2f} s"
                             f" after the {first}'s {first_mode} ended")


def report_read_no_half_written_partition(events: Sequence[dict[str, Any]]) -> Claim:
    return _after(events, "the report never saw a half-written partition", "backfill",
                  "report", BACKFILLED, "X", "S")


def schema_change_waited_for_the_report(events: Sequence[dict[str, Any]]) -> Claim:
    return _after(events, "the schema change waited for the report's read",
                  "report", "schema", "sales.customers", "S", "X")


def no_conflicting_holds(events: Sequence[dict[str, Any]]) -> Claim:
    """No two holds of one object, one of them X, overlapped in time: the lock manager's
    guarantee, checked over the whole run (leases included)."""
    text = "no two conflicting locks were ever held at once"
    holds, _ = build(events)
    by_object: dict[str, list[Hold]] = {}
    for h in holds:
        by_object.setdefault(h.object, []).append(h)
    checked = 0
    for obj, group in by_object.items():
        group.sort(key=lambda h: h.start_ms)
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                if b.start_ms >= a.end_ms:
                    continue
                checked += 1
                if "X" in (a.mode, b.mode) and _overlap_ms(a, b) > STAMP_SLACK_MS:
                    return Claim(text, False, f"{a.job}'s {a.mode} and {b.job}'s {b.mode} on"
                                              f" {obj} overlapped for"
                                              f" {_overlap_ms(a, b) / 1000:.2f} s")
    return Claim(text, True, f"{len(holds)} holds on {len(by_object)} objects;"
                             f" {checked} overlapping pairs, all shared")


def _created_ms(events: Sequence[dict[str, Any]]) -> dict[str, int]:
    """When each partition was first committed: the end of the first X hold on it."""
    holds, _ = build(events)
    created: dict[str, int] = {}
    for h in sorted(holds, key=lambda h: h.end_ms):
        if h.mode == "X" and "/" in h.object:
            created.setdefault(h.object, h.end_ms)
    return created


def scheduled_runs_match_explain(events: Sequence[dict[str, Any]],
                                 explained: dict[str, list[list[str]]]) -> Claim:
    """Each scheduled run took the locks EXPLAIN LOCKS gives for its query at the end of
    the demo, less the partitions committed after the run began to ask."""
    text = "every scheduled run took the locks EXPLAIN LOCKS names for its query"
    created = _created_ms(events)
    runs: dict[str, int] = {}
    for g in _grants(events, "scheduler"):
        qid = str(g.get("query_id", ""))
        if not qid.startswith(SCHEDULED_PREFIX):
            continue
        name = qid[len(SCHEDULED_PREFIX):].rsplit("-", 1)[0]
        if name not in explained:
            return Claim(text, False, f"a scheduled run of {name}, a query the demo did not"
                                      " explain")
        took = {tuple(lock) for lock in g["locks"]}
        planned = {tuple(lock) for lock in explained[name]}
        asked_ms = g["ts"] - g.get("wait_ms", 0)
        later = {lock for lock in planned - took
                 if lock[1] == "S" and created.get(lock[0], 0) > asked_ms}
        if took - planned or planned - took - later:
            wrong = sorted(took ^ (planned - later))
            return Claim(text, False, f"the run {qid} differs from EXPLAIN LOCKS in"
                                      f" {', '.join(f'{o}:{m}' for o, m in wrong[:4])}")
        runs[name] = runs.get(name, 0) + 1
    expected = set(explained)
    if set(runs) != expected:
        return Claim(text, False, "no scheduled run of "
                                  + ", ".join(sorted(expected - set(runs))))
    return Claim(text, True, ", ".join(f"{n} runs of {name}" for name, n in sorted(runs.items()))
                 + ", each with its query's locks")


def lease_held_off_the_compaction(events: Sequence[dict[str, Any]]) -> Claim:
    """The scheduled compaction was denied while the operator's lease held its table, and
    ran after the lease was dropped."""
    text = "the operator's maintenance lease held off the scheduled compaction"
    table = "sales.orders_compact"
    lease = _holds(events, "ops-maintenance", table, "X")
    if not lease:
        return Claim(text, False, f"no maintenance lease on {table} in the log")
    start, end = lease[0].start_ms, lease[0].end_ms
    denied = [e for e in events if e["event"] == "denial" and e.get("job") == "scheduler"
              and start <= e["ts"] <= end + STAMP_SLACK_MS
              and any(b["object"] == table for b in e.get("blockers", []))]
    ran = [h for h in _holds(events, "scheduler", table, "X") if h.start_ms >= start]
    if not denied or not ran or ran[0].start_ms < end - STAMP_SLACK_MS:
        return Claim(text, False, f"{len(denied)} denials of the compaction during the lease,"
                                  f" {'a run during it' if ran else 'no run after it'}")
    times = "once" if len(denied) == 1 else f"{len(denied)} times"
    return Claim(text, True, f"the compaction was denied {times} in the lease's"
                             f" {(end - start) / 1000:.1f} s and ran"
                             f" {(ran[0].start_ms - end) / 1000:.1f} s after its drop")


def check(events: Iterable[dict[str, Any]],
          explained: dict[str, list[list[str]]]) -> list[Claim]:
    """Every claim of the demo, checked on one run's events."""
    events = sorted(events, key=lambda e: e.get("ts", 0))
    return [writers_side_by_side(events), writers_never_waited_for_each_other(events),
            report_read_no_half_written_partition(events),
            schema_change_waited_for_the_report(events),
            scheduled_runs_match_explain(events, explained),
            lease_held_off_the_compaction(events), no_conflicting_holds(events)]


def main(argv: Sequence[str]) -> int:
    from zklock.observe.events import read_events

    explained = json.loads(Path(argv[1]).read_text()) if len(argv) > 1 else {}
    claims = check(read_events([argv[0]]), explained)
    for claim in claims:
        print(claim.line())
    return 0 if all(c.held for c in claims) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
