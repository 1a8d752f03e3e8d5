"""The alert rules and dashboard zklock ships (zklock/observe/monitoring/), checked with
Debian's Prometheus: promtool checks the rules and runs their unit tests
(rules_test.yml), and a real Prometheus scrapes real zklock processes (one holding, waiting
for and losing locks, with leases and a reaper; a scheduler running scheduled queries), so
that every panel's query and every rule's expression returns data, and the alert for a lock
held too long fires."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

from click.testing import CliRunner
from conftest import ADMIN, PROJECT, wait_for
from prometheus_client import REGISTRY
from zklock.cli.main import cli
from zklock.scheduler.admin import ScheduledQueries
from zklock.scheduler.ddl import parse_scheduled_ddl
from zklock.scheduler.store import SchedulerStore

from zklock.config import Settings
from zklock.manager import connect
from zklock.servers.ports import free_port
from zklock.testing import terminate

HERE = Path(__file__).parent
ZKLOCK = str(Path(sys.executable).parent / "zklock")


def shipped(*args: str) -> str:
    out = CliRunner().invoke(cli, ["monitoring", *args])
    assert out.exit_code == 0, out.output
    return out.output


def rule_list(text: str) -> list[dict]:
    """The alerting rules of a rule file (yaml's loader would do; the file is ours and
    regular, so the names and expressions are read by their keys)."""
    rules, current = [], None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if m := re.match(r"\s+- alert: (\w+)", line):
            current = {"alert": m.group(1)}
            rules.append(current)
        elif current is not None and (m := re.match(r"(\s+)expr: (.*)", line)):
            if m.group(2).strip() == "|":
                body = []
                for follow in lines[i + 1:]:
                    if len(follow) - len(follow.lstrip()) <= len(m.group(1)):
                        break
                    body.append(follow.strip())
                current["expr"] = " ".join(body)
            else:
                current["expr"] = m.group(2).strip()
    return rules


def exported_names() -> set[str]:
    """Every series name zklock's metrics export (with a histogram's suffixes)."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}
    names = set()
    for family in REGISTRY.collect():
        if family.name.startswith("zklock_"):
            names.update(family.name + s for s in suffixes.get(family.type, ("",)))
    return names


def test_the_shipped_rules_pass_promtool(tmp_path) -> None:
    rules = tmp_path / "zklock.yml"
    rules.write_text(shipped("rules", "--runbook-base", "https://wiki.example.com/zklock/ops"))
    check = subprocess.run(["promtool", "check", "rules", str(rules)], capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS: 9 rules found" in check.stdout
    assert "https://wiki.example.com/zklock/ops#zklockheldtoolong" in rules.read_text()


def test_each_alert_fires_on_its_series_and_stays_silent_beside_them() -> None:
    """promtool's unit tests: one per alert, each with a series that fires it and one that
    must not."""
    tested = set(re.findall(r"alertname: (\w+)", (HERE / "rules_test.yml").read_text()))
    alerts = {r["alert"] for r in rule_list(shipped("rules"))}
    assert alerts == tested
    run = subprocess.run(["promtool", "test", "rules", "rules_test.yml"], cwd=HERE,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_each_alert_has_a_runbook_section_in_the_operations_doc() -> None:
    doc = (PROJECT / "docs" / "operations.md").read_text()
    anchors = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
               for h in re.findall(r"^#+ (.+)$", doc, re.M)}
    for rule in rule_list(shipped("rules")):
        assert rule["alert"].lower() in anchors, rule["alert"]


def test_the_dashboard_is_a_grafana_dashboard_of_zklocks_own_metrics() -> None:
    """Grafana's dashboard model, as its JSON schema has it: a title, a uid, an integer
    schemaVersion, a datasource variable every panel and target uses, panels with ids,
    types, grid positions and targets (refId, expr); and every metric is one zklock
    exports."""
    dash = json.loads(shipped("dashboard"))
    assert dash["title"] and dash["uid"] and isinstance(dash["schemaVersion"], int)
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    names = exported_names()
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dash["panels"]:
        assert panel["type"] == "timeseries" and panel["title"]
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"}
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"]
        for target in panel["targets"]:
            assert target["refId"] and target["datasource"]["uid"] == "${datasource}"
            used = set(re.findall(r"\bzklock_[a-z_]+", target["expr"]))
            assert used and used <= names, (panel["title"], used - names)


LOCK_PROCESS = """
import sys, threading, time
from kazoo.client import KazooClient
from zklock import LockManager, LockNotAcquired
from zklock.leases.reaper import LeaseReaper

hosts, root, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
holder = LockManager(hosts=hosts, root=root, metrics_port=port, retries=0)
held = holder.acquire([("m.held", "X")], query_id="long-runner")  # held until killed
waiter = LockManager(hosts=hosts, root=root, retries=2, retry_interval=0.05)
try:
    waiter.acquire([("m.held", "X")])
except LockNotAcquired:
    pass  # denials and retries counted
lease = holder.grab_lease([("m.leased", "X")], 3600)
holder.drop_lease(lease)
LeaseReaper(holder, every=1).start()
lost = holder.acquire([("m.lost", "X")])
gone = threading.Event()
lost.on_lost(lambda _set: gone.set())
print("ready", flush=True)
sys.stdin.readline()  # once Prometheus scrapes this process: a loss it sees happen
other = KazooClient(hosts=hosts)
other.start()
for node in lost.node_paths:  # another client deletes it: the set is lost
    other.delete(node)
# the node check notices within NODE_CHECK_S (0.2 s); the bound is generous for a loaded machine
print("lost" if gone.wait(60) else "not lost", flush=True)
time.sleep(3600)  # the subject: a process holding a lock, until the test kills it
"""


def prometheus_api(port: int, path: str, **params: str) -> dict:
    url = f"http://127.0.0.1:{port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
    doc = json.loads(urllib.request.urlopen(url, timeout=10).read())
    assert doc["status"] == "success", doc
    return doc["data"]


def test_a_real_prometheus_scrapes_zklock_every_query_returns_data_and_an_alert_fires(
        tmp_path, zk_hosts, root, sched_conf) -> None:
    locks_port, sched_port, prom_port = free_port(), free_port(), free_port()
    # the shipped rules, with "held too long" at 3 s and no wait, so that it fires here
    rules = shipped("rules").replace(
        "(zklock_lock_oldest_held_seconds) > 3600\n        for: 1m",
        "(zklock_lock_oldest_held_seconds) > 3\n        for: 0s")
    assert "> 3\n" in rules
    (tmp_path / "rules.yml").write_text(rules)
    (tmp_path / "prometheus.yml").write_text(f"""
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [rules.yml]
scrape_configs:
  - job_name: locks
    static_configs: [{{targets: ["127.0.0.1:{locks_port}"]}}]
  - job_name: scheduler
    static_configs: [{{targets: ["127.0.0.1:{sched_port}"]}}]
""")
    env = {"ZKLOCK_ZK": zk_hosts, "ZKLOCK_ROOT": root,
           "ZKLOCK_SCHEDULER_ROOT": sched_conf["scheduler_root"], "ZKLOCK_USER": ADMIN,
           "ZKLOCK_SCHEDULER_PROGRESS_INTERVAL": "0.3s", "SPARK_LOCAL_DIRS": str(tmp_path),
           "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"}
    procs = []
    client = None
    try:
        procs.append(subprocess.Popen(
            [sys.executable, "-c", LOCK_PROCESS, zk_hosts, root, str(locks_port)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=open(tmp_path / "locks.log", "w"), text=True))
        procs.append(subprocess.Popen(
            [ZKLOCK, "scheduler", "run", "--quiet-period", "0", "--executors", "1",
             "--metrics-port", str(sched_port), "--conf", "spark.master=local[1]",
             "--conf", "spark.ui.enabled=false",
             "--conf", f"spark.sql.warehouse.dir={tmp_path / 'wh'}"],
            env=env, stdout=open(tmp_path / "scheduler.log", "w"), stderr=subprocess.STDOUT,
            cwd=tmp_path))
        procs.append(subprocess.Popen(
            ["prometheus", f"--config.file={tmp_path / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{prom_port}"],
            stdout=open(tmp_path / "prometheus.log", "w"), stderr=subprocess.STDOUT))
        assert procs[0].stdout.readline().strip() == "ready", (tmp_path / "locks.log").read_text()
        settings = Settings.resolve(sched_conf)
        client = connect(settings)
        store = SchedulerStore(client, settings)
        assert wait_for(lambda: store.live_executors(), timeout=120), \
            (tmp_path / "scheduler.log").read_text()[-3000:]
        admin = ScheduledQueries(store, settings)
        admin.apply(parse_scheduled_ddl("CREATE SCHEDULED QUERY tick EVERY 1 SECOND AS SELECT 1"))
        admin.apply(parse_scheduled_ddl("CREATE SCHEDULED QUERY broken EVERY 1 SECOND"
                                        " AS SELECT * FROM no_such_table"))

        def query(expr: str) -> list:
            return prometheus_api(prom_port, "query", query=expr)["result"]

        # the loss, once Prometheus has scraped the process without it
        assert wait_for(lambda: query('zklock_locks_held{job="locks"}'), timeout=60)
        procs[0].stdin.write("lose\n")
        procs[0].stdin.flush()
        assert procs[0].stdout.readline().strip() == "lost"

        dashboard = json.loads(shipped("dashboard"))
        exprs = [t["expr"].replace("$job", ".*")
                 for p in dashboard["panels"] for t in p["targets"]]
        # a rule's measured quantity: its expression without the threshold it compares to
        exprs += [re.sub(r"\s*(>|==)\s*[\d.]+\s*$", "", r["expr"])
                  for r in rule_list(rules)]
        assert wait_for(lambda: not [e for e in exprs if not query(e)], timeout=120), \
            [e for e in exprs if not query(e)]

        def firing() -> list[str]:
            return [a["labels"]["alertname"] for a in prometheus_api(prom_port, "alerts")["alerts"]
                    if a["state"] == "firing"]
        assert wait_for(lambda: "ZkLockHeldTooLong" in firing(), timeout=60), firing()
        assert wait_for(lambda: "ZkLockLost" in firing(), timeout=60), firing()
    finally:
        terminate(*procs)
        if client is not None:
            client.stop()
            client.close()
