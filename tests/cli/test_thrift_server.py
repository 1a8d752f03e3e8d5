"""`zklock spark thrift-server` (cli/thrift_server.py): Spark's own Thrift JDBC server, whose
JDBC clients' statements zklock's engine locks through its child lock client, driven with
Spark's own beeline as a BI tool or dbt would."""

from __future__ import annotations

import subprocess
import threading

import pytest
from conftest import PYTHON, wait_for
from zklock.cli.connect_server import pyspark_home

from zklock import LockManager
from zklock.ports import free_port


def cli(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "zklock.cli.main", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def beeline(url: str, user: str, sql: str) -> subprocess.CompletedProcess:
    """Spark's beeline, as JDBC user ``user``."""
    return subprocess.run([str(pyspark_home() / "bin" / "beeline"), "-u", url, "-n", user,
                           "--silent=true", "-e", sql], capture_output=True, text=True,
                          timeout=300)


def rows(url: str, sql: str) -> list[str]:
    out = beeline(url, "alice", sql)
    assert out.returncode == 0, out.stdout + out.stderr
    return [line.strip("| ").strip() for line in out.stdout.splitlines()
            if line.startswith("|")][1:]


@pytest.fixture(scope="module")
def thrift(tmp_path_factory, zk_hosts):
    base = tmp_path_factory.mktemp("thrift")
    root = "/zklock-tests-thrift-server"
    state = base / "state"
    out = cli("--zk", zk_hosts, "--root", root, "--state-dir", state, "spark",
              "thrift-server", "start", "--port", free_port(), "--warehouse", base / "wh",
              "--conf", "spark.driver.memory=768m",
              # a statement waits (by retries) for the set of the one before it, which the
              # engine releases in the background; a denial comes after 20 attempts
              "--conf", "spark.zklock.lock.retries=20",
              "--conf", "spark.zklock.lock.retryInterval=0.05")
    assert out.returncode == 0, out.stderr
    url = out.stdout.strip()
    try:
        yield {"url": url, "root": root, "state": state}
        assert cli("--state-dir", state, "spark", "thrift-server",
                   "stop").stdout.strip() == "stopped"
        after = cli("--state-dir", state, "spark", "thrift-server", "status")
        assert after.returncode == 1 and after.stdout.startswith("not running")
    finally:
        cli("--state-dir", state, "spark", "thrift-server", "stop")


def test_jdbc_clients_statements_are_locked(thrift, zk_hosts):
    url, root = thrift["url"], thrift["root"]
    status = cli("--state-dir", thrift["state"], "spark", "thrift-server", "status")
    assert status.returncode == 0 and url in status.stdout
    again = cli("--state-dir", thrift["state"], "spark", "thrift-server", "start")
    assert again.returncode == 1 and "already runs" in again.stderr
    assert again.stderr.count("\n") == 1 and "Traceback" not in again.stderr

    created = beeline(url, "alice", "CREATE TABLE jdbc_t (id INT) USING parquet;"
                                    " INSERT INTO jdbc_t VALUES (1)")
    assert created.returncode == 0, created.stdout + created.stderr
    holder = LockManager(hosts=zk_hosts, root=root, retries=200, retry_interval=0.05)
    try:
        # the engine releases the INSERT's set in the background: the holder's retries wait
        with holder.acquire([("default.jdbc_t", "X")], query_id="holder"):
            denied = beeline(url, "alice", "INSERT INTO jdbc_t VALUES (2)")
            assert denied.returncode != 0
            assert "ZKLOCK_LOCK_DENIED" in denied.stdout + denied.stderr
            assert "default.jdbc_t (X requested) is held in X" in denied.stdout + denied.stderr
        assert rows(url, "SELECT id FROM jdbc_t") == ["1"]  # unchanged

        # while a slow INSERT holds its X, the holder data names the JDBC user
        slow = threading.Thread(target=beeline, args=(
            url, "bob", "INSERT INTO jdbc_t SELECT CAST(id + 0 * length(coalesce(java_method("
                        "'java.lang.Thread', 'sleep', 300L), '')) AS INT) FROM range(2, 12, 1, 1)"))
        slow.start()
        try:
            held = wait_for(lambda: [r for r in holder.show("default.jdbc_t", extended=True)
                                     if r.mode.value == "X"], timeout=120)
            assert held and held[0].data.user == "bob", held
            assert "java_method" in held[0].data.query
        finally:
            slow.join(120)
        assert len(rows(url, "SELECT id FROM jdbc_t")) == 11
    finally:
        holder.close()
