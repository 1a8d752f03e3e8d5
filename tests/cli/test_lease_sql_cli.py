"""Leases through SQL (LockingSession) and through `zklock lease`."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from zklock.cli.main import cli

from zklock import InvalidArguments, LeaseNotFound, LockNotAcquired


def test_lock_table_blocks_a_pipeline_until_unlock(make_locking, db, spark):
    admin, pipeline = make_locking(user="ops"), make_locking()
    (row,) = admin.sql(f"LOCK TABLE {db}.orders PARTITION (ds='2024-01-01', hr=1)"
                       " EXCLUSIVE FOR 10 MINUTES").collect()
    assert row.object == f"{db}.orders/ds=2024-01-01/hr=1" and row.mode == "X"
    with pytest.raises(LockNotAcquired, match="lease"):
        pipeline.sql(f"INSERT INTO {db}.orders PARTITION (ds='2024-01-01', hr=1) VALUES (1, 1.0)")
    (lease,) = admin.sql(f"SHOW LEASE {db}.orders").collect()
    assert lease.lease_id == row.lease_id and lease.user == "ops"
    assert lease.holder.startswith("ops@")  # unique per process: ops@host:pid:random
    assert (lease.end_utc - lease.start_utc).total_seconds() == 600
    locks = admin.sql(f"SHOW LOCKS {db}.orders EXTENDED").collect()
    explicit = [r for r in locks if r.lock_type == "explicit"]
    assert explicit and all(r.end_at is not None and r.lease_id == row.lease_id
                            for r in explicit)
    admin.sql(f"UNLOCK TABLE {db}.orders PARTITION (ds='2024-01-01', hr=1)")
    pipeline.sql(f"INSERT INTO {db}.orders PARTITION (ds='2024-01-01', hr=1) VALUES (1, 1.0)")
    with pytest.raises(LeaseNotFound):
        admin.sql(f"UNLOCK TABLE {db}.orders PARTITION (ds='2024-01-01', hr=1)")


def test_lock_database_shared_and_drop_force_lease(make_locking, db):
    admin, pipeline = make_locking(user="ops"), make_locking()
    admin.sql(f"LOCK DATABASE {db} SHARED FOR 30 SECONDS")
    admin.sql(f"LOCK TABLE {db}.dim EXCLUSIVE")
    pipeline.table(f"{db}.orders").count()  # S with S: fine
    with pytest.raises(LockNotAcquired):
        pipeline.sql(f"DROP DATABASE {db} CASCADE")
    assert len(admin.sql("SHOW LEASES").collect()) == 2
    (row,) = admin.sql(f"DROP FORCE LEASE {db}.dim").collect()
    assert row.dropped_nodes == 2  # the table's node and its database's S node
    (row,) = admin.sql("DROP FORCE LEASE").collect()
    assert row.dropped_nodes == 1 and admin.sql("SHOW LEASE").collect() == []


@pytest.mark.parametrize("sql", [
    "LOCK TABLE db.t", "LOCK TABLE db.t SHARED FOR ten MINUTES", "LOCK TABLE db.t BOTH",
    "LOCK TABLE db.t EXCLUSIVE FOR 5 FORTNIGHTS", "UNLOCK TABLE", "DROP FORCE LEASES x y z",
    "LOCK TABLE db.t PARTITION (ds=) SHARED",
])
def test_bad_lease_sql_is_a_clear_error(locking, sql):
    with pytest.raises(InvalidArguments):
        locking.sql(sql)


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def test_cli_lease_lifecycle(zk_hosts, root, make_manager):
    base = ["--zk", zk_hosts, "--root", root, "lease"]
    out = run(*base, "grab", "sales.orders:X", "sales.orders/ds=1:S", "--duration", "1h",
              "--holder", "backfill")
    assert out.exit_code == 0, out.output
    lease_id = int(out.output)
    out = run(*base, "grab", "sales.orders:S", "--duration", "10s")
    assert out.exit_code == 3 and "backfill" in out.output
    rows = json.loads(run(*base, "list", "--json").output)
    assert [r["lease_id"] for r in rows] == [lease_id] and rows[0]["holder"] == "backfill"
    text = run(*base, "list", "sales.orders").output
    assert "backfill" in text and "sales.orders:X" in text
    out = run(*base, "extend", str(lease_id))  # another holder's lease: refused
    assert out.exit_code == 1 and "held by backfill" in out.output
    assert "Traceback" not in out.output
    assert run(*base, "extend", str(lease_id), "--holder", "backfill").exit_code == 0
    out = run(*base, "drop", str(lease_id), "--holder", "backfill")
    assert out.output.strip() == f"dropped lease {lease_id}"
    out = run(*base, "drop", str(lease_id), "--holder", "backfill")
    assert out.exit_code == 1 and "no lease" in out.output and "Traceback" not in out.output
    assert run(*base, "reap").output.startswith("reaped 0")


def test_cli_force_drop_asks_unless_yes(zk_hosts, root, make_manager):
    mgr = make_manager()
    mgr.grab_lease([("db.t", "X")], duration_s=60)
    base = ["--zk", zk_hosts, "--root", root, "lease", "force-drop"]
    assert run(*base).exit_code == 2  # neither objects nor --all
    out = run(*base, "--all", input="n\n")
    assert "nothing dropped" in out.output and len(mgr.list_lease()) == 1
    out = run(*base, "db.t", "--yes")
    assert out.output.strip() == "dropped 2 lock node(s)" and mgr.list_lease() == []


@pytest.mark.parametrize("args", [["grab", "db.t", "--duration", "1h"],
                                  ["grab", "db.t:Q", "--duration", "1h"],
                                  ["grab", "db.t:X", "--duration", "soon"],
                                  ["grab", "bad name:X", "--duration", "1h"],
                                  ["extend", "abc"]])
def test_cli_lease_bad_input(zk_hosts, root, args):
    out = run("--zk", zk_hosts, "--root", root, "lease", *args)
    assert out.exit_code in (1, 2) and "Traceback" not in out.output


def test_unlock_drops_only_what_it_names(make_locking, db):
    admin = make_locking(user="ops")
    admin.sql(f"LOCK TABLE {db}.orders PARTITION (ds='2024-01-01', hr=1) EXCLUSIVE")
    admin.sql(f"LOCK TABLE {db}.dim SHARED")
    with pytest.raises(LeaseNotFound):
        admin.sql(f"UNLOCK TABLE {db}.orders")  # the lease is on a partition of it
    with pytest.raises(LeaseNotFound):
        admin.sql(f"UNLOCK DATABASE {db}")
    assert len(admin.sql("SHOW LEASES").collect()) == 2
    with pytest.raises(InvalidArguments, match="does not name a partition"):
        admin.sql(f"DROP FORCE LEASE {db}.orders PARTITION (dss='2024-01-01')")
    assert len(admin.sql("SHOW LEASES").collect()) == 2
    admin.sql(f"UNLOCK TABLE {db}.dim")
    assert len(admin.sql("SHOW LEASES").collect()) == 1
