"""zklock with executors in JVMs of their own (``local-cluster[2,1,1024]``: Spark's own
master with separate executor processes, what YARN, Kubernetes and standalone give), so that
what the suite shows on a local master stays true on a cluster: tasks, task commits and the
committers run in the executors, the job commit and the locks in the driver.

One application (tests/spark/cluster_app.py, in a process of its own) runs every case:
two partition writers of one table at once; the fenced commit refusing a write whose lock
node was deleted; a lost lock cancelling tasks that run in the executors. The wheel's jar
reaching the executors is tests/scripts/test_build_dist.py's pipeline, on the same master.

Marked soak: its cluster takes a minute and a half to start, so `make soak-spark` runs it
(CI too, after `make test`), beside the other all-or-nothing cases under faults.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import PROJECT, PYTHON

pytestmark = pytest.mark.soak


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, zk_hosts) -> dict:
    work = tmp_path_factory.mktemp("cluster")
    out = subprocess.run([PYTHON, str(PROJECT / "tests" / "spark" / "cluster_app.py"),
                          zk_hosts, "/zklock-tests-local-cluster", str(work)],
                         capture_output=True, text=True, timeout=900, cwd=work)
    assert out.returncode == 0, out.stderr[-4000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert any("zklock" in jar for jar in seen["jars"]), seen["jars"]
    return seen


def test_two_partition_writers_of_one_table_at_once(cluster) -> None:
    assert cluster["two_writers"] == {"errors": [], "counts": {"a": 2000, "b": 2000}}


def test_two_threads_of_one_application_at_once_all_or_nothing(cluster) -> None:
    """tests/spark/test_concurrent_writers.py's threads, with tasks in executor JVMs."""
    from writers_app import check

    check(cluster["threads"])


def test_the_fenced_commit_refuses_a_write_whose_locks_were_lost(cluster) -> None:
    seen = cluster["fenced_commit"]
    assert seen["reached_commit"] and seen["deleted"] == 1, seen
    assert seen["lost"] and "locks lost before commit" in seen["error"], seen
    assert seen["rows"] == [1], seen


def test_a_lost_lock_cancels_tasks_running_in_executor_jvms(cluster) -> None:
    seen = cluster["cancelled_tasks"]
    assert seen["executors"] == 2 and seen["tasks_ran"], seen
    assert seen["lost"] and "cancelled" in seen["error"], seen
    assert all(done < total for total, done in seen["tasks"]), seen  # cut short
    assert seen["rows"] == 0, seen
