"""ZooKeeper digest auth and ACLs on a real server: who may read, create and delete."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from zklock.cli.main import cli

from zklock import LockManager
from zklock.auth import Credentials
from zklock.errors import NotAuthorized

USER = "pipelines:s3cret-pipelines"
ADMIN = "ops:s3cret-ops"


@pytest.fixture
def creds(tmp_path, monkeypatch):
    user_file = tmp_path / "zklock.auth"
    user_file.write_text(USER + "\n")
    admin_file = tmp_path / "admin.auth"
    admin_file.write_text("# the admin identity\n" + ADMIN + "\n")
    monkeypatch.delenv("ZKLOCK_AUTH", raising=False)
    monkeypatch.delenv("ZKLOCK_ADMIN_AUTH", raising=False)
    return {"auth_file": str(user_file), "admin_auth_file": str(admin_file),
            "acl_admin_digest": Credentials.parse(ADMIN, "test").digest}


def client(hosts, auth=None):
    c = KazooClient(hosts=hosts, auth_data=[("digest", auth)] if auth else None)
    c.start(timeout=30)
    return c


def test_foreign_and_anonymous_clients_are_kept_out(zk_hosts, root, creds, make_manager):
    a = make_manager(auth_file=creds["auth_file"], acl_admin_digest=creds["acl_admin_digest"])
    held = a.acquire([("sales.orders/ds=1", "X")], query_id="q")
    node = held.held[-1].node_path
    obj = node.rsplit("/", 1)[0]
    for auth in (None, "mallory:guess"):
        other = client(zk_hosts, auth)
        try:
            with pytest.raises(NoAuthError):
                other.get_children(root)
            with pytest.raises(NoAuthError):
                other.get(node)
            with pytest.raises(NoAuthError):
                other.create(f"{obj}/write-i000000000000000000000000-", ephemeral=True,
                             sequence=True)
            with pytest.raises(NoAuthError):
                other.delete(node)
        finally:
            other.stop()
            other.close()
    # the same identity (another pipeline) works, and so does the admin
    b = make_manager(auth_file=creds["auth_file"], acl_admin_digest=creds["acl_admin_digest"])
    assert {r.object for r in b.show()} == {"sales", "sales.orders", "sales.orders/ds=1"}
    admin = client(zk_hosts, ADMIN)
    try:
        assert admin.get_children(obj)
    finally:
        admin.stop()
        admin.close()
    held.release()


def test_admin_operations_need_the_admin_identity(root, creds, make_manager):
    user_only = make_manager(auth_file=creds["auth_file"],
                             acl_admin_digest=creds["acl_admin_digest"])
    user_only.grab_lease([("db.t", "X")], duration_s=60)
    with pytest.raises(NotAuthorized, match="force-drop needs the admin identity"):
        user_only.force_drop_lease(["db.t"])
    with pytest.raises(NotAuthorized, match="reaping leases needs the admin identity"):
        user_only.reap_leases()
    admin = make_manager(auth_file=creds["auth_file"], admin_auth_file=creds["admin_auth_file"],
                         acl_admin_digest=creds["acl_admin_digest"])
    assert admin.force_drop_lease(["db.t"]) >= 1
    assert admin.list_lease() == []


def test_cli_takes_credentials_from_env_or_file_with_clear_denials(zk_hosts, root, creds,
                                                                   make_manager):
    a = make_manager(auth_file=creds["auth_file"], acl_admin_digest=creds["acl_admin_digest"])
    with a.acquire([("db.t", "X")]):
        base = ["--zk", zk_hosts, "--root", root]
        denied = CliRunner().invoke(cli, [*base, "show"])
        assert denied.exit_code == 1 and "denied access (check credentials)" in denied.output
        by_env = CliRunner().invoke(cli, [*base, "show"], env={"ZKLOCK_AUTH": USER})
        assert by_env.exit_code == 0 and "db.t" in by_env.output
        by_file = CliRunner().invoke(cli, [*base, "show"],
                                     env={"ZKLOCK_AUTH_FILE": creds["auth_file"]})
        assert by_file.exit_code == 0 and "db.t" in by_file.output
        no_admin = CliRunner().invoke(cli, [*base, "lease", "force-drop", "db.t", "--yes",
                                            "--include-implicit"],
                                      env={"ZKLOCK_AUTH": USER})
        assert no_admin.exit_code == 1 and "admin identity" in no_admin.output
        digest = CliRunner().invoke(cli, ["auth", "digest", "--admin"],
                                    env={"ZKLOCK_ADMIN_AUTH": ADMIN})
        assert digest.output.strip() == creds["acl_admin_digest"]
    # no option anywhere takes a password on the command line
    for args in (["--help"], ["auth", "--help"], ["lease", "--help"], ["scheduler", "run",
                                                                       "--help"]):
        assert "password" not in CliRunner().invoke(cli, args).output.lower()
    bad = CliRunner().invoke(cli, ["--zk", zk_hosts, "show"], env={"ZKLOCK_AUTH": "nocolon"})
    assert bad.exit_code == 1 and "user:password" in bad.output


def test_lock_lease_and_scheduler_nodes_all_carry_the_acl(zk_hosts, root, creds,
                                                         make_manager, zk):
    a = make_manager(auth_file=creds["auth_file"], acl_admin_digest=creds["acl_admin_digest"])
    lease = a.grab_lease([("db.t/p=1", "X")], duration_s=60)
    acl, _ = client(zk_hosts, USER).get_acls(f"{root}/db/t")
    schemes = {(x.id.scheme, x.id.id.split(":")[0]) for x in acl}
    assert schemes == {("digest", "pipelines"), ("digest", "ops")}
    assert lease


def test_sasl_where_the_server_is_set_up_for_it(tmp_path, monkeypatch):
    """A server with SASLAuthenticationProvider and a JAAS file: DIGEST-MD5 logins."""
    from zklock.servers.ports import free_port
    from zklock.servers.zookeeper import ZkServer

    jaas = tmp_path / "jaas.conf"
    jaas.write_text('Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n'
                    '  user_pipelines="s3cret-pipelines"\n  user_ops="s3cret-ops";\n};\n')
    srv = ZkServer(tmp_path / "zk", port=free_port(), tick_time_ms=500, force_sync=False,
                   extra_config={"authProvider.sasl":
                                 "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"},
                   jvm_flags=[f"-Djava.security.auth.login.config={jaas}"])
    srv.start(wait=90)
    monkeypatch.setenv("ZKLOCK_AUTH", USER)
    try:
        mgr = LockManager(hosts=srv.connect, root="/sasl", retries=0, auth_scheme="sasl",
                          acl_admin_digest="ops:unused")
        try:
            with mgr.acquire([("db.t", "X")]) as held:
                assert held.is_valid
                anon = client(srv.connect)
                try:
                    with pytest.raises(NoAuthError):
                        anon.get_children("/sasl/db/t")
                finally:
                    anon.stop()
                    anon.close()
            acl, _ = mgr.client.get_acls("/sasl/db")
            assert {(a.id.scheme, a.id.id) for a in acl} == {("sasl", "pipelines"),
                                                            ("sasl", "ops")}
        finally:
            mgr.close()
    finally:
        srv.stop()
