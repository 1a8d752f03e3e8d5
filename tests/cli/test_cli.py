"""The zklock command line against a real ZooKeeper."""

from __future__ import annotations

import json
import subprocess
import time

from click.testing import CliRunner
from conftest import PYTHON
from zklock.cli.main import cli

from zklock.servers.ports import free_port


def run(*args: str, env: dict | None = None):
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def test_show_table_and_json(make_manager, zk_hosts, root):
    a = make_manager()
    statement = ("INSERT OVERWRITE sales.orders PARTITION (ds='2024-01-01')\n  SELECT * FROM"
                 " staging.orders WHERE ds = '2024-01-01' AND region IN ('eu', 'us')")
    with a.acquire([("sales.orders/ds=2024-01-01", "X")], query_id="q-9", query=statement):
        out = run("--zk", zk_hosts, "--root", root, "show")
        assert out.exit_code == 0
        lines = out.output.splitlines()
        assert lines[0].split() == ["OBJECT", "MODE"]
        assert any(line.split() == ["sales.orders/ds=2024-01-01", "X"] for line in lines)
        out = run("--zk", zk_hosts, "--root", root, "show", "sales.orders", "--json")
        rows = json.loads(out.output)
        assert {r["object"] for r in rows} == {"sales.orders", "sales.orders/ds=2024-01-01"}
        for r in rows:
            assert {"object", "mode", "user", "query_id", "acquired_at"} <= set(r)
            assert r["query_id"] == "q-9"
        assert {r["query"] for r in rows} == {statement}  # --json: the whole text
        out = run("--zk", zk_hosts, "--root", root, "show", "--extended")
        assert "QUERY_ID" in out.output and "q-9" in out.output
        # what the holder runs, on one line, cut to the table's width
        assert " QUERY " in out.output.splitlines()[0]
        assert "INSERT OVERWRITE sales.orders PARTITION (ds='2024-01-01') SELECT" in out.output
        assert "region IN" not in out.output and "\u2026" in out.output
    out = run("--zk", zk_hosts, "--root", root, "show")
    assert out.output.strip() == "(none)"


def test_env_sets_hosts(make_manager, zk_hosts, root):
    out = run("--root", root, "show", "--json", env={"ZKLOCK_ZK": zk_hosts})
    assert out.exit_code == 0 and json.loads(out.output) == []


def test_errors_are_one_line_without_traceback(zk_hosts, root):
    out = run("--zk", zk_hosts, "--root", root, "show", "db/../x")
    assert out.exit_code != 0
    assert "invalid lock object" in out.output and "Traceback" not in out.output
    out = run("--zk", zk_hosts, "--root", "relative", "show")
    assert out.exit_code != 0 and "root must be" in out.output


def test_unreachable_zookeeper_answers_within_connect_timeout():
    port = free_port()
    t0 = time.monotonic()
    proc = subprocess.run([PYTHON, "-m", "zklock.cli.main", "--zk", f"127.0.0.1:{port}", "show"],
                          capture_output=True, text=True, timeout=60,
                          env={"ZKLOCK_CONNECT_TIMEOUT": "2", "PATH": "/usr/bin:/bin"})
    assert time.monotonic() - t0 < 15
    assert proc.returncode != 0
    assert "cannot reach ZooKeeper" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_server_start_status_stop(tmp_path):
    port = free_port()
    state = str(tmp_path / "state")
    out = run("--state-dir", state, "server", "start", "--port", str(port))
    try:
        assert out.exit_code == 0, out.output
        assert out.output.strip() == f"127.0.0.1:{port}"
        out = run("--state-dir", state, "server", "status", "--json")
        st = json.loads(out.output)
        assert st["running"] and st["mode"] == "standalone"
        # with no --zk, commands find the server started from the state dir
        out = run("--state-dir", state, "show", "--json")
        assert out.exit_code == 0 and json.loads(out.output) == []
        # a second start on a taken port refuses cleanly
        other = run("--state-dir", str(tmp_path / "other"), "server", "start", "--port",
                    str(port))
        assert other.exit_code != 0 and "already in use" in other.output
    finally:
        out = run("--state-dir", state, "server", "stop")
    assert out.output.strip() == "stopped"
    out = run("--state-dir", state, "server", "status")
    assert out.exit_code == 1 and "not running" in out.output


def test_show_extended_takes_any_json_in_a_nodes_query(make_manager, zk, zk_hosts, root):
    """A lock node's data is another client's too: a query that is no text (a number, null)
    is shown as text, never a traceback."""
    a = make_manager()
    with a.acquire([("sales.orders", "X")], query_id="q-odd", query="INSERT ..."):
        node = next(r.node for r in a.show("sales.orders", extended=True)
                    if r.object == "sales.orders")
        for odd in (42, None, ["a", "b"]):
            data = json.loads(zk.get(node)[0])
            data["query"] = odd
            zk.set(node, json.dumps(data).encode())
            out = run("--zk", zk_hosts, "--root", root, "show", "sales.orders", "--extended")
            assert out.exit_code == 0 and "q-odd" in out.output, out.output
