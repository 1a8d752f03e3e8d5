"""Lock events (JSON lines), the wait-for view, and Prometheus metrics, on a real ZooKeeper."""

from __future__ import annotations

import json
import threading
import urllib.request

import pytest
from click.testing import CliRunner
from conftest import wait_for
from zklock.cli.main import cli

from zklock import LockNotAcquired
from zklock.observe.events import EventLog, read_events
from zklock.servers.ports import free_port
from zklock.testing import expire_session


def test_event_log_records_grant_denial_retry_release_loss(make_manager, zk_hosts, tmp_path):
    log = str(tmp_path / "events.jsonl")
    a = make_manager(event_log=log, job="ingest")
    b = make_manager(event_log=log, job="report", retries=2, retry_interval=0.05)
    held = a.acquire([("sales.orders/ds=1", "X")], query_id="q-a")
    try:
        b.acquire([("sales.orders/ds=1", "S")], query_id="q-b")
    except Exception:
        pass
    held.release()
    from prometheus_client import REGISTRY

    def held_x() -> float:
        return REGISTRY.get_sample_value("zklock_locks_held", {"mode": "X"}) or 0.0

    before = held_x()
    lost = a.acquire([("sales.orders/ds=2", "X")], query_id="q-lost")
    assert held_x() == before + 1
    expire_session(a.client, zk_hosts)
    assert wait_for(lambda: not lost.is_valid, timeout=10)
    lost.release()  # a lost set released: its locks left the gauge once, at the loss
    assert held_x() == before
    c = make_manager(event_log=log, job="ops")
    c.force_drop_lease(["sales.orders"])
    EventLog.for_path(log).flush()
    events = list(read_events([log]))
    kinds = [(e["job"], e["event"]) for e in events]
    assert kinds[:8] == [("ingest", "grant"),
                         ("report", "denial"), ("report", "retry"),
                         ("report", "denial"), ("report", "retry"),
                         ("report", "denial"),
                         ("ingest", "release"), ("ingest", "grant")]
    assert ("ingest", "loss") in kinds and ("ops", "force-drop") in kinds
    denial = events[1]
    assert denial["blockers"][0]["object"] == "sales.orders/ds=1"
    assert denial["blockers"][0]["job"] == "ingest" and "q-a" in denial["blockers"][0]["holder"]
    assert events[5]["final"] is True
    grant = events[0]
    assert ["sales.orders/ds=1", "X"] in grant["locks"] and grant["wait_ms"] >= 0
    assert all({"ts", "user", "host", "pid"} <= set(e) for e in events)


def test_waits_shows_who_blocks_whom(make_manager, zk_hosts, root):
    a = make_manager(job="backfill")
    b = make_manager(job="report", retries=200, retry_interval=0.05)
    held = a.acquire([("sales.orders/ds=1", "X")], query_id="q-backfill")
    got = []
    t = threading.Thread(target=lambda: got.append(
        b.acquire([("sales.orders/ds=1", "S")], query_id="q-report",
                  query="SELECT sum(total) FROM sales.orders WHERE ds = '1'")))
    t.start()
    try:
        assert wait_for(lambda: len(a.waits.list()) == 1, timeout=10)
        w = a.waits.list()[0]
        assert (w.job, w.query_id) == ("report", "q-report")
        assert w.blockers[0]["job"] == "backfill" and "q-backfill" in w.blockers[0]["holder"]
        out = CliRunner().invoke(cli, ["--zk", zk_hosts, "--root", root, "waits"])
        assert out.exit_code == 0 and "report" in out.output and "q-backfill" in out.output
        assert "SELECT sum(total) FROM sales.orders WHERE ds = '1'" in out.output  # its why
        rows = json.loads(CliRunner().invoke(cli, ["--zk", zk_hosts, "--root", root, "waits",
                                                   "--json"]).output)
        assert rows[0]["wants"] == [["sales", "S"], ["sales.orders", "S"],
                                    ["sales.orders/ds=1", "S"]]
        # show is not confused by the .waits folder
        assert {r.object for r in a.show()} == {"sales", "sales.orders", "sales.orders/ds=1"}
    finally:
        held.release()
        t.join(20)
    assert got and got[0].is_valid
    assert wait_for(lambda: a.waits.list() == [], timeout=10)
    got[0].release()


def test_waits_says_how_many_objects_it_leaves_out(make_manager, zk_hosts, root):
    """The WANTS column shows four objects, then ``… (+k more)``: the object a request is
    stuck on may be one it left out."""
    a = make_manager(job="backfill")
    b = make_manager(job="report", retries=200, retry_interval=0.05)
    held = a.acquire([("sales.orders/ds=7", "X")])
    wanted = [(f"sales.orders/ds={i}", "S") for i in range(8)]  # + sales, sales.orders
    t = threading.Thread(target=lambda: b.acquire(wanted).release())
    t.start()
    try:
        assert wait_for(lambda: len(a.waits.list()) == 1, timeout=10)
        out = CliRunner().invoke(cli, ["--zk", zk_hosts, "--root", root, "waits"])
        assert out.exit_code == 0 and "… (+6 more)" in out.output, out.output
    finally:
        held.release()
        t.join(20)


def test_show_watch_refreshes(make_manager, zk_hosts, root):
    a = make_manager()
    with a.acquire([("db.t", "X")]):
        out = CliRunner().invoke(cli, ["--zk", zk_hosts, "--root", root, "show", "--watch",
                                       "--interval", "10ms", "--count", "2"])
    assert out.exit_code == 0
    # (click drops the clear-screen codes when the output is not a terminal)
    assert out.output.count("zklock show") == 2 and out.output.count("db.t ") == 2


def test_metrics_endpoint_answers(make_manager):
    port = free_port()
    a = make_manager(metrics_port=port, job="metrics")
    b = make_manager(retries=0)
    with a.acquire([("m.t", "X")]):
        try:
            b.acquire([("m.t", "S")])
        except Exception:
            pass
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10
                                      ).read().decode()
    for name in ("zklock_lock_wait_seconds_bucket", "zklock_lock_grants_total",
                 "zklock_lock_denials_total", "zklock_locks_held", "zklock_session_state",
                 "zklock_lock_losses_total", "zklock_scheduled_executions_total",
                 "zklock_scheduled_trigger_to_start_seconds"):
        assert name in text, name
    assert 'zklock_lock_grants_total{mode="X"}' in text
    assert 'zklock_lock_denials_total{mode="S"}' in text


def test_timeline_picture_from_the_event_log(make_manager, tmp_path):
    log = str(tmp_path / "events.jsonl")
    a = make_manager(event_log=log, job="writer")
    b = make_manager(event_log=log, job="reader", retries=1, retry_interval=0.05)
    with a.acquire([("sales.orders/ds=1", "X")]):
        try:
            b.acquire([("sales.orders/ds=1", "S")])
        except Exception:
            pass
    with b.acquire([("sales.orders/ds=1", "S")]):
        pass
    ops = make_manager(event_log=log, job="ops-shell")  # an operator's lease blocks a writer
    lease = ops.leases.grab([("sales.orders/ds=2", "X")], "1h", holder="operator")
    try:
        a.acquire([("sales.orders/ds=2", "X")], retries=0)
    except Exception:
        pass
    ops.leases.drop(lease, holder="operator")
    EventLog.for_path(log).flush()
    out_png = tmp_path / "t.png"
    out = CliRunner().invoke(cli, ["timeline", "--events", log, "--object", "sales.orders",
                                   "-o", str(out_png)])
    assert out.exit_code == 0, out.output
    assert "2 holds" not in out.output and "denials" in out.output
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from zklock.observe.timeline import build

    holds, marks = build(read_events([log]), prefix="sales.orders")
    assert {(h.object, h.mode, h.job) for h in holds} == {
        ("sales.orders", "S", "writer"), ("sales.orders/ds=1", "X", "writer"),
        ("sales.orders", "S", "reader"), ("sales.orders/ds=1", "S", "reader"),
        ("sales.orders", "S", "operator"), ("sales.orders/ds=2", "X", "operator")}
    lease_hold = next(h for h in holds if h.object == "sales.orders/ds=2")
    assert lease_hold.end_ms - lease_hold.start_ms < 60_000  # to its drop, not its 1 h end
    assert [(m.kind, m.job) for m in marks] == [("denial", "reader"), ("denial", "reader"),
                                                 ("denial", "writer")]
    empty = CliRunner().invoke(cli, ["timeline", "--events", log, "--object", "nope",
                                     "-o", str(tmp_path / "x.png")])
    assert empty.exit_code == 1 and "no lock events" in empty.output
    missing = CliRunner().invoke(cli, ["timeline", "--events", str(tmp_path / "none.jsonl")])
    assert missing.exit_code == 1 and "no event log" in missing.output


def test_show_stays_aligned_with_hundreds_of_locks(make_manager, zk_hosts, root):
    a = make_manager()
    objs = [(f"sales.orders/ds=2024-01-{d:02d}/hr={h}", "S") for d in range(1, 11)
            for h in range(30)]
    with a.acquire(objs):
        out = CliRunner().invoke(cli, ["--zk", zk_hosts, "--root", root, "show",
                                       "--extended"])
    lines = out.output.splitlines()
    assert len(lines) == 1 + 300 + 10 + 2  # partitions, their ds parents, table, database
    col = lines[0].index("MODE")
    assert all(line[col - 2:col] == "  " and line[col] in "SX" for line in lines[1:])


def test_a_holder_with_intents_is_named_a_holder_not_a_waiter(make_manager, zk_hosts, root):
    """A set granted after a denial keeps its intents until it releases: waits, show
    --extended and denials must read them as the holder they are."""
    first, reader = make_manager(job="first"), make_manager(job="reader", retries=200,
                                                             retry_interval=0.05)
    held = first.acquire([("sales.orders", "X")])
    got = []
    t = threading.Thread(target=lambda: got.append(reader.acquire([("sales.orders", "S")],
                                                                  query_id="q-reader")))
    t.start()
    assert wait_for(lambda: len(first.waits.list()) == 1, timeout=10)
    held.release()
    t.join(20)
    (reading,) = got
    assert reading.intents  # granted after a denial: it keeps them while it holds
    writer = make_manager(job="writer", retries=0)
    with pytest.raises(LockNotAcquired) as err:
        writer.acquire([("sales.orders", "X")])
    text = str(err.value)
    assert "held in S by user" in text and "q-reader" in text
    assert "queued behind" not in text
    rows = [r for r in first.show(extended=True, intents=True) if r.object == "sales.orders"]
    assert [(r.kind, r.mode.value) for r in rows] == [("implicit", "S")]
    waiting = make_manager(job="waiting", retries=200, retry_interval=0.05)
    t = threading.Thread(target=lambda: waiting.acquire([("sales.orders", "X")]).release())
    t.start()
    try:
        assert wait_for(lambda: len(first.waits.list()) == 1, timeout=10)
        (w,) = first.waits.list()
        assert [b["kind"] for b in w.blockers] == ["lock"]
        out = CliRunner().invoke(cli, ["--zk", zk_hosts, "--root", root, "waits"])
        assert "queued behind" not in out.output and "q-reader" in out.output, out.output
    finally:
        reading.release()
        t.join(20)
