"""Two Spark applications on one Hive Metastore (``zklock metastore``), with Hive-format tables.

A platform's applications share one catalog. Here two real applications (processes of their
own, tests/spark/hive_app.py) join the metastore that ``zklock metastore start`` runs, and
lock Hive-format (text) tables: Spark writes those with ``InsertIntoHiveTable`` and
``CreateHiveTableAsSelectCommand``, not the datasource commands the rest of the suite uses.
One application writes a partition while the other is denied X on it; both then list the
same partitions, with no REFRESH or RECOVER PARTITIONS anywhere.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import wait_for
from deployed import shared_metastore
from zklock.cli.main import cli

from zklock.observe.events import read_events

HERE = Path(__file__).resolve().parent
ROOT = "/zklock-tests-metastore"


class HiveApp:
    """One hive_app.py process: ``ask`` sends a statement, ``answer`` reads its reply."""

    def __init__(self, name: str, conf: dict) -> None:
        self.name = name
        self.log = Path(conf["latch"]).parent / f"{name}.log"
        self.proc = subprocess.Popen([sys.executable, str(HERE / "hive_app.py"), name,
                                      json.dumps(conf)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=open(self.log, "w"),
                                     text=True)

    def wait_ready(self) -> None:
        line = self.proc.stdout.readline()
        assert line, f"{self.name} exited: {self.log.read_text()[-3000:]}"
        assert json.loads(line) == {"ready": True}

    def ask(self, sql: str, retries: int = 0, plain: bool = False) -> None:
        self.proc.stdin.write(json.dumps({"sql": sql, "retries": retries, "plain": plain})
                              + "\n")
        self.proc.stdin.flush()

    def answer(self) -> dict:
        line = self.proc.stdout.readline()
        assert line, f"{self.name} exited: {self.log.read_text()[-3000:]}"
        return json.loads(line)

    def run(self, sql: str, retries: int = 0, plain: bool = False) -> list:
        self.ask(sql, retries, plain)
        reply = self.answer()
        assert "rows" in reply, f"{self.name}: {sql}: {reply}"
        return reply["rows"]

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("metastore-state")


@pytest.fixture(scope="module")
def metastore(state: Path):
    with shared_metastore(state) as status:
        yield status


@pytest.fixture(scope="module")
def apps(metastore: dict, state: Path, zk_hosts: str):
    """Two applications on the metastore, started side by side (each takes 10 to 30 s)."""
    made = {}
    for name in ("writer", "other"):
        conf = {"spark": metastore["spark_conf"], "hosts": zk_hosts, "root": ROOT,
                "event_log": str(state / "events.jsonl"), "latch": str(state / name)}
        Path(conf["latch"]).mkdir()
        made[name] = HiveApp(name, conf)
    for app in made.values():
        app.wait_ready()
    made["writer"].run("CREATE DATABASE hv")  # each test's tables in it
    yield made
    for app in made.values():
        app.close()


def grants(state: Path, job: str, lock: list) -> list:
    """The lock lists of ``job``'s grants that hold ``lock``, from the shared event log (an
    application writes its events a moment after they happen: callers wait for them)."""
    return [e["locks"] for e in read_events([str(state / "events.jsonl")])
            if e["event"] == "grant" and e["job"] == job and lock in e["locks"]]


def test_metastore_refuses_a_second_start_in_one_line(metastore: dict, state: Path) -> None:
    again = CliRunner().invoke(cli, ["--state-dir", str(state), "metastore", "start",
                                     "--port", str(metastore["port"])])
    assert again.exit_code == 1
    assert again.output.count("\n") == 1 and "already runs" in again.output


def test_a_hive_table_partition_written_by_one_application_is_denied_to_the_other(
        apps: dict, state: Path) -> None:
    writer, other = apps["writer"], apps["other"]
    writer.run("CREATE TABLE hv.sales (id INT) PARTITIONED BY (ds STRING) STORED AS TEXTFILE")
    # the writer's INSERT holds its locks at the latch until the test opens it
    writer.ask("INSERT INTO hv.sales PARTITION (ds='2024-01-01')"
               " SELECT zk_latch(CAST(id AS INT)) FROM range(3)")
    latch = state / "writer"
    # the writer holds its locks at the latch: only then can the other be denied (on a
    # loaded machine its INSERT may take minutes to get there; unchecked, the other's
    # statement ran before the writer's and was granted)
    assert wait_for(lambda: (latch / "entered").exists(), timeout=300), \
        writer.log.read_text()[-3000:]

    plan = other.run("EXPLAIN LOCKS INSERT OVERWRITE TABLE hv.sales PARTITION"
                     " (ds='2024-01-01') SELECT 7")
    assert ["hv.sales/ds=2024-01-01", "X"] in [row[:2] for row in plan]
    other.ask("INSERT OVERWRITE TABLE hv.sales PARTITION (ds='2024-01-01') SELECT 7")
    denied = other.answer()
    assert denied.get("error") == "LockNotAcquired", denied
    assert "writer" in denied["message"]

    (latch / "open").touch()
    assert "rows" in writer.answer()
    other.run("INSERT INTO hv.sales PARTITION (ds='2024-01-02') SELECT 8")
    listed = {name: app.run("SHOW PARTITIONS hv.sales") for name, app in apps.items()}
    assert listed["writer"] == listed["other"] == [["ds=2024-01-01"], ["ds=2024-01-02"]]
    assert other.run("SELECT sum(id) FROM hv.sales") == [[0 + 1 + 2 + 8]]

    # the event log: InsertIntoHiveTable took X on the partition it wrote, its parents S
    writes = wait_for(lambda: grants(state, "writer", ["hv.sales/ds=2024-01-01", "X"]))
    assert [sorted(map(tuple, locks)) for locks in writes] == [
        [("hv", "S"), ("hv.sales", "S"), ("hv.sales/ds=2024-01-01", "X")]]


def test_create_hive_table_as_select_locks_its_source_and_its_table(apps: dict,
                                                                    state: Path) -> None:
    writer, other = apps["writer"], apps["other"]
    writer.run("CREATE TABLE hv.source (id INT) PARTITIONED BY (ds STRING) STORED AS TEXTFILE")
    writer.run("INSERT INTO hv.source PARTITION (ds='1') SELECT 1")
    ctas = "CREATE TABLE hv.copy STORED AS TEXTFILE AS SELECT id, ds FROM hv.source"
    plan = [row[:2] for row in other.run(f"EXPLAIN LOCKS {ctas}")]
    assert ["hv.copy", "X"] in plan and ["hv.source/ds=1", "S"] in plan
    other.run(ctas)
    assert writer.run("SELECT id, ds FROM hv.copy") == [[1, "1"]]
    taken = wait_for(lambda: grants(state, "other", ["hv.copy", "X"]))
    assert ["hv.source/ds=1", "S"] in taken[0]


def test_a_read_after_another_applications_write_sees_its_files(apps: dict) -> None:
    """Spark keeps a session's file listings; under its locks a statement lists again
    (FreshListings.java), so it neither opens the files another application's overwrite
    deleted nor misses those its append added."""
    writer, other = apps["writer"], apps["other"]
    writer.run("CREATE TABLE hv.parts (id INT, ds STRING) USING parquet PARTITIONED BY (ds)")
    writer.run("CREATE TABLE hv.flat (id INT) USING parquet")
    writer.run("CREATE TABLE hv.sink (id INT) USING parquet")
    writer.run("INSERT INTO hv.parts PARTITION (ds='1') SELECT 1")
    writer.run("INSERT INTO hv.flat SELECT 1")
    # the other application lists both tables, and Spark keeps what it listed
    assert other.run("SELECT sum(id) FROM hv.parts") == other.run("SELECT sum(id) FROM hv.flat") \
        == [[1]]
    writer.run("INSERT OVERWRITE hv.parts PARTITION (ds='1') SELECT 5")
    writer.run("INSERT INTO hv.parts PARTITION (ds='1') SELECT 7")
    writer.run("INSERT OVERWRITE hv.flat SELECT 5")
    writer.run("INSERT INTO hv.flat SELECT 7")

    assert other.run("SELECT sum(id) FROM hv.parts") == [[12]]  # a LockingSession's query
    other.run("INSERT INTO hv.sink SELECT id FROM hv.flat")  # a command (the engine)
    assert writer.run("SELECT sum(id) FROM hv.sink") == [[12]]
    writer.run("INSERT INTO hv.flat SELECT 8")
    # a plain session's query (the engine's read locks)
    assert other.run("SELECT sum(id) FROM hv.flat", plain=True) == [[20]]
