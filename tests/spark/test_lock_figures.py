"""Lock figures on zklock's plan nodes (LockFigures.java): a statement that waited for
another holder shows, in its SQL metrics (Spark's SQL tab, the event log, the History
Server), how long it waited, how many attempts, and what it locked in S and in X, and its
node's text names whom it waited for (WaitNote.java); read back here from Spark's own SQL
status store, where the UI reads them. The application's totals are a source of Spark's
metrics system (LockMetricsSource.java), read back from it."""

from __future__ import annotations

import json
import re
import threading

from conftest import wait_for

from zklock.locks.mode import Mode
from zklock.locks.objects import LockObject
from zklock.spark import enforce
from zklock.spark.lock_client import engine_of


def sql_metrics(spark, execution_id: int) -> dict[str, str]:
    """The SQL metrics of one execution, by name, as the UI shows them."""
    store = spark._jsparkSession.sharedState().statusStore()
    plan_metrics = store.execution(execution_id).get().metrics()
    values = store.executionMetrics(execution_id)
    shown = {}
    for i in range(plan_metrics.size()):
        m = plan_metrics.apply(i)
        value = values.get(m.accumulatorId())
        if value.isDefined():
            shown[m.name()] = str(value.get())
    return shown


def executions(spark) -> list[int]:
    store = spark._jsparkSession.sharedState().statusStore()
    listed = store.executionsList()
    return [listed.apply(i).executionId() for i in range(listed.size())]


def number(text: str) -> float:
    """The figure a metric shows (a sum: '2'; a time: '1.6 s', or Spark's
    'total (min, med, max)' block, whose total comes first)."""
    value, unit = re.search(r"([\d.,]+)\s*(ms|s|m|h)?", text.split("\n")[-1]).groups()
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}.get(unit or "", 1)
    return float(value.replace(",", "")) * scale


def plan_nodes(spark, execution_id: int) -> list[str]:
    """The text of each node of one execution's plan graph, as the SQL tab shows it."""
    nodes = spark._jsparkSession.sharedState().statusStore().planGraph(execution_id).allNodes()
    return [nodes.apply(i).desc() for i in range(nodes.size())]


def job_descriptions(spark) -> list[str]:
    """The description of each job the application ran, as the Jobs tab shows it."""
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)
    return [str(jobs.apply(i).description().get()) for i in range(jobs.size())
            if jobs.apply(i).description().isDefined()]


def test_a_statement_that_waited_shows_its_lock_figures_in_its_sql_metrics(
        spark, db, make_manager, zk, root, capfd) -> None:
    table = f"{db}.dim"
    holder = make_manager()
    held = holder.acquire([(LockObject.parse(table), Mode.EXCLUSIVE)], query_id="backfill")
    before = set(executions(spark))
    outcome: dict[str, object] = {}

    def insert() -> None:
        try:
            spark.sql(f"INSERT INTO {table} SELECT * FROM {table} LIMIT 1")
            outcome["done"] = True
        except Exception as exc:  # the test fails on it below
            outcome["error"] = exc

    with enforce(spark, make_manager(retries=400, retry_interval=0.05)):
        writer = threading.Thread(target=insert)
        writer.start()
        # the insert is waiting: its wait record is in ZooKeeper (after its first denial),
        # and it said so on the driver's stderr, naming the holder's query
        assert wait_for(lambda: zk.exists(f"{root}/.waits") and zk.get_children(f"{root}/.waits"),
                        timeout=60)
        said: list[str] = []
        assert wait_for(lambda: said.extend(capfd.readouterr().err.splitlines())
                        or any(" waits for " in ln for ln in said), timeout=30), said
        line = next(ln for ln in said if " waits for " in ln)
        assert line.startswith(f"zklock: INSERT INTO {table} SELECT * FROM {table} LIMIT 1"
                               f" waits for X on {table}: {table} (X requested) is held in X"
                               " by user"), line
        assert "query backfill" in line and line.endswith(" s so far"), line
        held.release()
        writer.join(120)
    assert outcome.get("done"), outcome
    # the insert's execution: the new one whose root is zklock's node, with figures posted
    figures = {e: sql_metrics(spark, e) for e in executions(spark) if e not in before}
    locked = [e for e, f in figures.items() if "lock attempts" in f]
    assert len(locked) == 1, figures
    shown = figures[locked[0]]
    # its node's text, and its details, name whom it waited for: the holder's object, user,
    # process, query (the UI's store is written by Spark's listener bus, after it returns)
    assert wait_for(lambda: any("waited for:" in n for n in plan_nodes(spark, locked[0])),
                    timeout=30), plan_nodes(spark, locked[0])
    root = next(n for n in plan_nodes(spark, locked[0]) if n.startswith("LockedCommand"))
    assert f"waited for: {table} (X requested) is held in X by user" in root, root
    assert "query backfill" in root, root
    store = spark._jsparkSession.sharedState().statusStore()
    details = store.execution(locked[0]).get().physicalPlanDescription()  # the tab's details
    assert f"Waited for: {table} (X requested) is held in X by user" in details, details
    assert number(shown["lock attempts"]) >= 2, shown
    assert number(shown["time waiting for locks"]) > 0, shown
    assert number(shown["objects locked in X"]) == 1, shown  # the table
    assert number(shown["objects locked in S"]) >= 1, shown  # its database
    assert number(shown["time holding locks"]) >= 0 and number(shown["lock sets lost"]) == 0
    # its jobs, in the Jobs tab, name whom it waited for too
    assert wait_for(lambda: any(d.startswith(f"zklock waited for: {table} (X requested) is held"
                                             " in X by user") and "query backfill" in d
                                for d in job_descriptions(spark)), timeout=30), \
        job_descriptions(spark)


def zklock_totals(spark) -> dict[str, int]:
    """What zklock's source in the driver's metrics system counts, read from Spark's
    metrics system in the JVM, as a sink reads it (py4j cannot reflect MetricsSystem)."""
    return json.loads(str(engine_of(spark).lockTotals()))


def test_the_applications_lock_totals_are_a_source_of_sparks_metrics_system(
        spark, db, make_manager) -> None:
    table = f"{db}.dim"
    with enforce(spark, make_manager()):
        spark.sql(f"SELECT count(*) FROM {table}").collect()  # a first statement registers it
        before = zklock_totals(spark)
        spark.sql(f"INSERT INTO {table} SELECT * FROM {table} LIMIT 1")
    after = zklock_totals(spark)
    assert after["statementsLocked"] == before["statementsLocked"] + 1, (before, after)
    assert after["lockWait"] == before["lockWait"] + 1
    assert after["lockHeld"] == before["lockHeld"] + 1
    # a process-wide counter: earlier tests of this Spark application lose sets on purpose
    assert after["lockSetsLost"] == before["lockSetsLost"]


def test_a_micro_batchs_write_shows_its_batchs_lock_figures(spark, db, make_manager, zk, root,
                                                           tmp_path) -> None:
    """A streaming query's batch holds its locks as a block (stream/MicroBatch.java); the
    INSERT it runs under them shows the batch's figures on its node: what it waited for the
    holder and what it locked."""
    table = f"{db}.ev"
    spark.sql(f"CREATE TABLE {table} (id BIGINT) USING parquet")
    source = tmp_path / "source"
    source.mkdir()
    (source / "0.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(5)))
    holder = make_manager()
    held = holder.acquire([(LockObject.parse(table), Mode.EXCLUSIVE)], query_id="backfill")
    before = set(executions(spark))
    with enforce(spark, make_manager(retries=2000, retry_interval=0.05)):
        query = (spark.readStream.schema("id BIGINT").json(str(source)).writeStream
                 .option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(availableNow=True).toTable(table))
        try:
            assert wait_for(lambda: zk.exists(f"{root}/.waits")
                            and zk.get_children(f"{root}/.waits"), timeout=60)
        finally:
            held.release()
        query.awaitTermination(120)
        assert query.exception() is None, query.exception()
    figures = {e: sql_metrics(spark, e) for e in executions(spark) if e not in before}
    locked = [f for f in figures.values() if "lock attempts" in f]
    assert locked, figures
    shown = max(locked, key=lambda f: number(f["time waiting for locks"]))
    assert number(shown["time waiting for locks"]) > 0, shown
    assert number(shown["lock attempts"]) >= 2, shown
    assert number(shown["objects locked in X"]) == 1, shown  # the table
