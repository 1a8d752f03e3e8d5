"""The demo's claim checker (scripts/demo_claims.py) on the event logs of real lock traffic.

Two jobs, each a LockManager of its own on the test's ZooKeeper, take the locks the demo's
backfill and ingest take, and write the same event log the demo reads. When they write
different partitions, the claims hold; when the backfill locks the whole table (jobs that
conflict), the claimed overlap did not happen and the checker says so. Every `make demo`
(run by .ci/run) checks its own run's log with the same functions and exits 1 on a failed
claim.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import wait_for

from zklock.observe.events import read_events

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import demo_claims  # noqa: E402
from demo_claims import BACKFILLED, INGESTED  # noqa: E402


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "events.jsonl"


@pytest.fixture
def jobs(make_manager, log: Path) -> dict:
    return {job: make_manager(job=job, user=job, event_log=str(log), retries=200)
            for job in ("backfill", "ingest")}


def events_of(log: Path, jobs: dict) -> list[dict]:
    for manager in jobs.values():
        manager.events.flush()
    return sorted(read_events([str(log)]), key=lambda e: e["ts"])


def test_writers_of_different_partitions_overlap_and_never_wait(jobs: dict, log: Path) -> None:
    with jobs["backfill"].acquire([(BACKFILLED, "X")]):
        with jobs["ingest"].acquire([(INGESTED[0], "X")]):
            # both held: keep them so until the stamps' own clock is past the ingest's grant
            # by more than the slack the checker counts as no overlap
            granted_ms = wait_for(lambda: [e["ts"] for e in events_of(log, jobs)
                                           if e["event"] == "grant" and e["job"] == "ingest"])
            overlap_ms = 3 * demo_claims.STAMP_SLACK_MS
            assert wait_for(lambda: time.time() * 1000 >= granted_ms[0] + overlap_ms,
                            timeout=1 + overlap_ms / 1000)
    events = events_of(log, jobs)

    side_by_side = demo_claims.writers_side_by_side(events)
    assert side_by_side.held, side_by_side
    assert "ds=2024-01-03" in side_by_side.proof
    assert demo_claims.writers_never_waited_for_each_other(events).held
    assert demo_claims.no_conflicting_holds(events).held


def test_a_backfill_of_the_whole_table_refutes_the_overlap(jobs: dict, log: Path) -> None:
    backfill = jobs["backfill"].acquire([("sales.orders", "X"), (BACKFILLED, "X")])
    ingest_done = threading.Event()

    def ingest() -> None:
        with jobs["ingest"].acquire([(INGESTED[0], "X")]):
            pass
        ingest_done.set()
    writer = threading.Thread(target=ingest)
    writer.start()
    # the ingest has been denied (it waits, the wait-for view shows it) before the backfill ends
    wait_for(lambda: any(w.job == "ingest" for w in jobs["backfill"].waits.list()), 30)
    assert not ingest_done.is_set()
    backfill.release()
    writer.join(30)
    assert ingest_done.is_set()
    events = events_of(log, jobs)

    side_by_side = demo_claims.writers_side_by_side(events)
    assert not side_by_side.held
    assert "no X hold of the ingest overlapped" in side_by_side.proof
    never_waited = demo_claims.writers_never_waited_for_each_other(events)
    assert not never_waited.held and "denials of one by the other" in never_waited.proof
    # what happened is still what a lock manager promises
    assert demo_claims.no_conflicting_holds(events).held
    assert [c.held for c in demo_claims.check(events, {})].count(False) >= 2
    again = subprocess.run([sys.executable, demo_claims.__file__, str(log)],
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 1 and "[FAILED] the backfill and the ingest" in again.stdout
