"""The ``zklock`` command: its lock, lease and server commands, and the entry point.

The group and what commands share live in :mod:`.app`; the scheduled-query commands in
:mod:`.schedule`, imported below so that ``zklock`` has them all.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

import click

from zklock.config import parse_duration
from zklock.servers import serverinfo

from .app import (
    Context,
    cli,
    emit,
    locking_session,
    with_spark_options,
)
from .render import brief


@cli.command()
@click.argument("target", required=False, metavar="[OBJECT]")
@click.option("--extended", is_flag=True, help="Show holder, query and times.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@click.option("--watch", is_flag=True, help="Refresh in place until Ctrl-C.")
@click.option("--interval", default="2s", show_default=True, help="With --watch: how often.")
@click.option("--count", type=int, default=0, help="With --watch: stop after N refreshes.")
@click.pass_obj
def show(obj: Context, target: Optional[str], extended: bool, as_json: bool, watch: bool,
         interval: str, count: int) -> None:
    """Held locks at or below OBJECT (db, db.table, db.table/k=v), or all.

    --extended adds holders and lists waiting requests' intents (KIND intent); locks of
    ZooKeeper recipe clients show as KIND foreign, nodes zklock cannot interpret as
    unknown (treated as X). Example: zklock show sales.orders --extended --watch
    """
    from zklock.config import parse_duration

    def render() -> None:
        records = obj.manager().show(target, extended=extended or as_json, intents=extended)
        rows = [r.to_dict(extended=extended or as_json) for r in records]
        cols = ["object", "mode"]
        if extended:
            cols += ["kind", "user", "host", "pid", "app", "query_id", "query", "acquired_at",
                     "fencing_token"]
            for r in rows:
                if r.get("kind") in ("foreign", "unknown"):
                    r["user"] = r["user"] or "(unknown)"
                if not as_json:  # what it runs: a micro-batch names its stream and batch
                    r["query"] = brief(r.get("query"))
        emit(rows, as_json, cols)
        odd = [r for r in records if r.origin in ("foreign", "unknown")]
        if odd and not as_json:
            if not extended:
                click.echo(f"zklock: {len(odd)} lock(s) of other clients or node(s) zklock"
                           " cannot interpret; --extended shows which", err=True)
            else:
                for r in odd[:20]:
                    what = ("a ZooKeeper recipe client's lock, holder unknown"
                            if r.origin == "foreign" else
                            "a node zklock cannot interpret, treated as an X lock")
                    click.echo(f"zklock: {r.node.rsplit('/', 1)[1]} on {r.object}: {what}",
                               err=True)

    if not watch:
        render()
        return
    pause = parse_duration(interval)
    shown = 0
    while True:
        if not as_json:
            click.echo("\x1b[H\x1b[2J", nl=False)  # home and clear: refresh in place
            click.echo(f"zklock show {target or ''} (every {interval}; Ctrl-C to stop)  "
                       f"{time.strftime('%H:%M:%S')}")
        render()
        shown += 1
        if count and shown >= count:
            return
        time.sleep(pause)


@cli.command()
@click.option("--events", "paths", multiple=True, type=click.Path(dir_okay=False),
              help="Event log file(s) (default: the event_log setting, ZKLOCK_EVENT_LOG).")
@click.option("--since", help="Only what happened in the last DURATION (e.g. 10m).")
@click.option("--object", "prefix", help="Only this object and what is below it.")
@click.option("-o", "--output", default="timeline.png", show_default=True,
              help="Picture to write (.png, .svg or .pdf).")
@click.pass_obj
def timeline(obj: Context, paths: Sequence[str], since: Optional[str], prefix: Optional[str],
             output: str) -> None:
    """Draw lock holds, denials and losses over time from the event log (Gantt-style).

    Example: zklock timeline --events events.jsonl --since 15m --object sales.orders -o t.png
    """
    from zklock.config import parse_duration
    from zklock.observe.events import read_events
    from zklock.observe.timeline import build, draw

    files = list(paths) or ([obj.settings.event_log] if obj.settings.event_log else [])
    if not files:
        raise click.UsageError("give --events FILE or set ZKLOCK_EVENT_LOG")
    missing = [f for f in files if not Path(f).exists()]
    if missing:
        raise click.ClickException(f"no event log at {', '.join(missing)}")
    since_ms = int((time.time() - parse_duration(since)) * 1000) if since else None
    holds, marks = build(read_events(files), since_ms, prefix)
    try:
        draw(holds, marks, output)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{output}: {len(holds)} holds, {sum(m.kind == 'denial' for m in marks)}"
               f" denials, {sum(m.kind == 'loss' for m in marks)} losses")


def _first(items: list, n: int, show: Any, sep: str) -> str:
    """The first ``n`` items shown, then ``… (+k more)`` when some were left out: the object a
    request is stuck on may be one of them."""
    text = sep.join(show(i) for i in items[:n])
    return f"{text}{sep}… (+{len(items) - n} more)" if len(items) > n else text


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@click.pass_obj
def waits(obj: Context, as_json: bool) -> None:
    """Requests still retrying after a denial, in queue order, and what blocks each:
    holders, intents queued ahead, recipe clients' locks, nodes zklock cannot interpret.

    QUEUE is the place the request's intents hold (- when it leaves none).
    Example: zklock waits --json
    """
    rows = []
    position = 0
    for w in obj.manager().waits.list():
        blockers = _first(w.blockers, 3, _blocker, "; ")
        wants = _first(w.wants, 4, lambda ow: f"{ow[0]}:{ow[1]}", " ")
        row = w.to_dict()
        if w.intents:
            position += 1
        if not as_json:
            row = {"queue": f"#{position}" if w.intents else "-",
                   "waiter": f"{w.job} ({w.user}@{w.host} pid {w.pid})",
                   "query_id": w.query_id, "query": brief(w.query), "wants": wants,
                   "blocked_by": blockers,
                   "waiting": f"{max(0, time.time() * 1000 - w.since_ms) / 1000:.1f}s",
                   "attempt": w.attempt}
        rows.append(row)
    emit(rows, as_json, ["queue", "waiter", "query_id", "query", "wants", "blocked_by",
                         "waiting", "attempt"])


def _blocker(b: dict) -> str:
    kind = b.get("kind", "lock")
    if kind == "intent":
        return f"{b['object']} queued behind {b['held']} intent of {b['holder']}"
    return f"{b['object']} {b['held']} by {b['holder']}"


@cli.group()
def server() -> None:
    """Run a local ZooKeeper (Debian's zookeeper package) for development and demos.

    Example: zklock server start && export ZKLOCK_ZK=127.0.0.1:2181
    """


def _server(ctx_obj: Context, port: Optional[int] = None):
    from zklock.servers.zookeeper import ZkServer

    state = Path(ctx_obj.settings.state_dir)
    if port is None:
        try:
            port = serverinfo.read(state).port
        except (serverinfo.NoServerInfo, ValueError, IndexError):
            port = 2181
    return ZkServer(state, port=port)


def _ensemble(ctx_obj: Context, size: int = 3):
    from zklock.servers.ensemble import Ensemble

    return Ensemble(Path(ctx_obj.settings.state_dir) / "ensemble", size)


@server.command("start")
@click.option("--port", type=int, default=None, help="Client port (default 2181).")
@click.option("--ensemble", "size", type=int, default=None,
              help="Start an ensemble of N servers on loopback instead (ports chosen free).")
@click.pass_obj
def server_start(obj: Context, port: Optional[int], size: Optional[int]) -> None:
    """Start a standalone ZooKeeper (or an ensemble) on loopback; print its connect string.

    Example: zklock server start --ensemble 3
    """
    if size is not None:
        if size < 1:
            raise click.UsageError("--ensemble needs at least 1 server")
        connect = _ensemble(obj, size).start()
        serverinfo.write(obj.settings.state_dir,
                         serverinfo.ServerInfo(connect, ensemble=size))
        click.echo(connect)
        return
    srv = _server(obj, port)
    connect = srv.start()
    click.echo(connect)


@server.command("stop")
@click.pass_obj
def server_stop(obj: Context) -> None:
    """Stop the ZooKeeper (or ensemble) started from this state directory.

    Example: zklock server stop
    """
    ens = _ensemble_info(obj)
    if ens is not None:
        _ensemble(obj, ens).stop()
        serverinfo.remove(obj.settings.state_dir)
        click.echo("stopped")
        return
    srv = _server(obj)
    click.echo("stopped" if srv.stop() else "not running")


def _ensemble_info(obj: Context) -> Optional[int]:
    try:
        return serverinfo.read(obj.settings.state_dir).ensemble
    except serverinfo.NoServerInfo:
        return None


@server.command("status")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def server_status(obj: Context, as_json: bool) -> None:
    """Whether the local ZooKeeper runs, its pid, mode and connect string (each member's
    for an ensemble).

    Example: zklock server status --json
    """
    ens = _ensemble_info(obj)
    if ens is not None:
        members = _ensemble(obj, ens).status()
        if as_json:
            click.echo(json.dumps(members))
        else:
            emit(members, False, ["id", "connect", "pid", "mode"])
        if not any(m["mode"] for m in members):
            sys.exit(1)
        return
    st = _server(obj).status()
    if as_json:
        click.echo(json.dumps(st))
    else:
        state = f"running ({st['mode'] or 'unknown mode'}), pid {st['pid']}" if st["running"] \
            else "not running"
        click.echo(f"{state}; connect {st['connect']}; state dir {st['state_dir']}")
    if not st["running"]:
        sys.exit(1)


@cli.group()
def lease() -> None:
    """Explicit, time-bound locks (leases): grab, list, extend, drop, recover, force-drop,
    reap.

    Example: zklock lease grab sales.orders:X --duration 1h
    """


def _lock_arg(text: str) -> tuple[str, str]:
    obj, sep, mode = text.rpartition(":")
    if sep and mode.upper() in ("S", "X", "SHARED", "EXCLUSIVE"):
        return obj, mode
    raise click.BadParameter(f"{text!r}: write OBJECT:S or OBJECT:X, e.g. sales.orders:X")


def _lease_rows(leases: Sequence[Any]) -> list[dict]:
    return [x.to_dict() for x in leases]


@lease.command("grab")
@click.argument("locks", nargs=-1, required=True, metavar="OBJECT:MODE...")
@click.option("--duration", required=True, help="How long, e.g. 90s, 10m, 1h.")
@click.option("--wait", default="0", show_default=True,
              help="How long to wait for conflicts to clear, e.g. 30s.")
@click.option("--holder", help="Holder name (default: unique to this process,"
              " user@host:pid:random); only the holder extends or drops the lease.")
@click.pass_obj
def lease_grab(obj: Context, locks: Sequence[str], duration: str, wait: str,
               holder: Optional[str]) -> None:
    """Take every OBJECT:MODE for DURATION, all or none; print the lease id.

    Example: zklock lease grab sales.orders:X sales.orders/ds=1:S --duration 1h --holder etl
    """
    specs = [_lock_arg(x) for x in locks]
    parse_duration(duration, positive=True)  # bad input fails before ZooKeeper is reached
    parse_duration(wait)
    mgr = obj.manager()
    lease_id = mgr.grab_lease(specs, duration_s=duration, wait_s=wait, holder=holder)
    click.echo(lease_id)
    if holder is None and not obj.settings.lease_holder:
        click.echo(f"zklock: held by {mgr.lease_holder}; only that holder extends or drops it"
                   f" (zklock lease drop {lease_id} --holder '{mgr.lease_holder}')", err=True)


@lease.command("list")
@click.argument("objects", nargs=-1, metavar="[OBJECT...]")
@click.option("--all", "all_", is_flag=True,
              help="Also leases past their end (not yet taken over, recovered or reaped).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@click.pass_obj
def lease_list(obj: Context, objects: Sequence[str], all_: bool, as_json: bool) -> None:
    """Live leases on OBJECTs (or all): id, holder, objects, start and end (ZooKeeper time).

    Example: zklock lease list sales.orders --all --json
    """
    rows = _lease_rows(obj.manager().list_lease(list(objects) or None, include_expired=all_))
    if not as_json:
        for r in rows:
            r["objects"] = " ".join(r["objects"])
    emit(rows, as_json, ["lease_id", "holder", "user", "start_utc", "end_utc", "objects"])


holder_option = click.option(
    "--holder", help="Act as this holder (default: this process's own, or lease_holder /"
    " ZKLOCK_LEASE_HOLDER); a lease of another holder is refused.")


@lease.command("extend")
@click.argument("lease_id", type=int)
@holder_option
@click.pass_obj
def lease_extend(obj: Context, lease_id: int, holder: Optional[str]) -> None:
    """Push your lease's end to now + its duration; prints the new end.

    Example: zklock lease extend 4294967301 --holder etl
    """
    click.echo(obj.manager().extend_lease(lease_id, holder=holder).end_utc)


@lease.command("drop")
@click.argument("lease_id", type=int)
@holder_option
@click.pass_obj
def lease_drop(obj: Context, lease_id: int, holder: Optional[str]) -> None:
    """Release your lease (another holder's: force-drop, or recover once it expired).

    Example: zklock lease drop 4294967301 --holder etl
    """
    obj.manager().drop_lease(lease_id, holder=holder)
    click.echo(f"dropped lease {lease_id}")


@lease.command("recover")
@click.argument("target", metavar="OBJECT")
@click.pass_obj
def lease_recover(obj: Context, target: str) -> None:
    """Drop the leases on OBJECT that are past their end, whoever holds them (HDFS's
    recoverLease); prints their ids.

    Example: zklock lease recover sales.orders
    """
    dropped = obj.manager().recover_lease(target)
    click.echo(f"recovered {len(dropped)} lease(s)" + (f": {' '.join(map(str, dropped))}"
                                                       if dropped else ""))


@lease.command("force-drop")
@click.argument("objects", nargs=-1, metavar="[OBJECT...]")
@click.option("--all", "all_", is_flag=True, help="Every lease under the root.")
@click.option("--include-implicit", is_flag=True,
              help="Also break other processes' implicit locks (admin break-lock).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def lease_force_drop(obj: Context, objects: Sequence[str], all_: bool, include_implicit: bool,
                     yes: bool) -> None:
    """Admin: drop the leases at or below OBJECTs (or --all), whoever holds them.

    Example: zklock lease force-drop sales.orders --include-implicit --yes
    """
    if bool(objects) == all_:
        raise click.UsageError("give OBJECTs or --all (not both)")
    what = "every lease" if all_ else f"the leases on {', '.join(objects)}"
    if include_implicit:
        what += " and implicit locks"
    if not yes and not click.confirm(f"Drop {what}?", default=False):
        click.echo("nothing dropped")
        return
    n = obj.manager().force_drop_lease(list(objects), include_implicit=include_implicit)
    click.echo(f"dropped {n} lock node(s)")


@lease.command("reap")
@click.option("--hard-limit", help="Override lease_hard_limit_s, e.g. 1h.")
@click.option("--every", help="Run as a service: a round every DURATION (e.g. 5m) until"
              " stopped; of several such services one reaps, the others stand by.")
@click.option("--rounds", type=click.IntRange(min=1), help="With --every: stop after N rounds.")
@click.pass_obj
def lease_reap(obj: Context, hard_limit: Optional[str], every: Optional[str],
               rounds: Optional[int]) -> None:
    """Delete leases expired for longer than the hard limit (default 1 h).

    Without a scheduler running, keep one or more `zklock lease reap --every 5m` services
    up (with the admin identity when ZooKeeper auth is on).
    Example: zklock lease reap --hard-limit 30m --every 5m
    """
    from zklock.config import parse_duration

    limit = parse_duration(hard_limit) if hard_limit is not None else None
    if every is None:
        if rounds is not None:
            raise click.UsageError("--rounds needs --every")
        reaped = obj.manager().reap_leases(limit)
        click.echo(f"reaped {len(reaped)} lease(s)" + (f": {' '.join(map(str, reaped))}"
                                                       if reaped else ""))
        return
    import signal

    from zklock.leases.reaper import LeaseReaper, ReapRound

    def report(r: ReapRound) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        if not r.leading:
            click.echo(f"{stamp} standby: {r.leader or 'another reaper'} reaps", nl=True)
        else:
            click.echo(f"{stamp} reaped {len(r.reaped)} lease(s)"
                       + (f": {' '.join(map(str, r.reaped))}" if r.reaped else ""))
        sys.stdout.flush()

    reaper = LeaseReaper(obj.manager(), parse_duration(every), limit, on_round=report)
    signal.signal(signal.SIGTERM, lambda *_: reaper.stop(timeout=0))
    try:
        reaper.run(rounds or 0)
    finally:
        reaper.stop(timeout=0)


@cli.command()
@click.argument("sql")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@with_spark_options
@click.pass_obj
def explain(obj: Context, sql: str, as_json: bool, conf: Sequence[str],
            init_sql: Optional[str]) -> None:
    """The locks SQL would take, in acquisition order, without taking them.

    Starts a local Spark session to resolve the catalog (about 10 s).
    Example: zklock explain "INSERT INTO sales.orders PARTITION (ds='1') SELECT ..."
    """
    plan = locking_session(obj, conf, init_sql).explain_locks(sql)
    rows = [{"object": o, "mode": m} for o, m in plan.rows()]
    emit(rows, as_json, ["object", "mode"])
    for note in plan.notes:
        click.echo(f"zklock: note: {note}", err=True)


@cli.command()
@click.argument("sql")
@click.option("--json", "as_json", is_flag=True, help="Print the result as a JSON array.")
@click.option("--limit", type=int, default=1000, show_default=True,
              help="Print at most this many rows.")
@with_spark_options
@click.pass_obj
def sql(obj: Context, sql: str, as_json: bool, limit: int, conf: Sequence[str],
        init_sql: Optional[str]) -> None:
    """Run one statement through a LockingSession and print its result.

    Example: zklock sql "SHOW LOCKS sales.orders EXTENDED"
    """
    session = locking_session(obj, conf, init_sql)
    df = session.sql(sql)
    columns = list(df.columns)
    if not columns:
        click.echo("OK")
        return
    with session.errors():  # a query's denial, as zklock's (exit code 3)
        rows = [r.asDict() for r in df.limit(limit).collect()]
    emit(rows, as_json, columns)


@cli.group()
def auth() -> None:
    """ZooKeeper identities: credentials come from ZKLOCK_AUTH / ZKLOCK_AUTH_FILE, never argv.

    Example: ZKLOCK_ADMIN_AUTH_FILE=/etc/zklock/admin zklock auth digest --admin
    """


@auth.command("digest")
@click.option("--admin", is_flag=True, help="The admin identity's digest instead.")
@click.pass_obj
def auth_digest(obj: Context, admin: bool) -> None:
    """Print the public digest (user:base64-sha1) of the configured identity, for
    acl_admin_digest.

    Example: ZKLOCK_ADMIN_AUTH_FILE=/etc/zklock/admin zklock auth digest --admin
    """
    from zklock.auth import Identity

    ident = Identity.from_settings(obj.settings)
    creds = ident.admin if admin else ident.user
    if creds is None:
        raise click.ClickException("no credentials: set ZKLOCK_ADMIN_AUTH(_FILE)" if admin
                                   else "no credentials: set ZKLOCK_AUTH or ZKLOCK_AUTH_FILE")
    click.echo(creds.digest)


@cli.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL.

    Example: eval "$(zklock completion bash)"   (add it to ~/.bashrc)
    """
    from click.shell_completion import get_completion_class

    cls = get_completion_class(shell)
    if cls is None:
        raise click.UsageError(f"no completion for {shell}")
    click.echo(cls(cli, {}, "zklock", "_ZKLOCK_COMPLETE").source())


from . import doctor as _doctor  # noqa: E402, F401  (adds its commands to the group)
from . import metastore as _metastore  # noqa: E402, F401  (adds its commands to the group)
from . import monitoring as _monitoring  # noqa: E402, F401  (adds its commands to the group)
from . import schedule as _schedule  # noqa: E402, F401  (adds its commands to the group)
from . import spark as _spark  # noqa: E402, F401  (adds its commands to the group)


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Console-script entry point."""
    try:
        cli.main(args=argv, prog_name="zklock")
    except KeyboardInterrupt:
        click.echo("zklock: interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
