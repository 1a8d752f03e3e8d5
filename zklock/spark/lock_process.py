"""The engine's lock client as a process of its own: ``python -m zklock.spark.lock_process``.

Spark's Thrift server, ``spark-sql``, a ``spark-submit`` that never calls ``enforce()`` and
Spark's own Connect server script never run zklock's Python, so no lock client registers in
their JVM. zklock's engine then starts this process as its child (ChildLockClient.java) and
sends it, one JSON document per line on stdin, the requests a py4j lock client gets
(EngineLockClient.java lists them); the answers go back on stdout, each with its request's
id, in whatever order they complete, since an acquire may wait through its retries while
another statement releases. The lock protocol keeps one implementation:
:class:`~zklock.spark.lock_client.EngineLockClient` answers both.

The first line is the application's Spark conf (its ``spark.zklock.*`` and Hive keys),
over the environment as a LockingSession's settings are; the first answer says it is
ready. When a set it granted is lost it says so (``{"event": "lost"}``) and the JVM cancels
the statement's jobs. It lives as long as its stdin: when the JVM closes it or dies, it
releases what it holds (closing its ZooKeeper session) and exits. A failure to start is
one line on stderr, which the JVM puts in the statement's refusal.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TextIO

from ..locks.locknode import LockNodeName
from ..manager import LockManager
from .lock_client import VERSION, EngineLockClient, client_profile, settings_from
from .protocol import Call, Event, Field, Outcome

#: Requests answered at once: each statement of the JVM waits on one.
WORKERS = 64


class LockProcess:
    """Answers the JVM's requests from ``stdin`` on ``stdout`` with ``client``."""

    def __init__(self, stdin: TextIO, stdout: TextIO) -> None:
        self.stdin, self.stdout = stdin, stdout
        self._write = threading.Lock()
        self.manager: LockManager | None = None
        self.client: EngineLockClient | None = None

    def send(self, doc: dict[str, Any]) -> None:
        line = json.dumps({Field.VERSION: VERSION, **doc})
        with self._write:
            self.stdout.write(line + "\n")
            self.stdout.flush()

    def start(self) -> None:
        """Read the application's conf, connect, and say ready."""
        hello = json.loads(self.stdin.readline() or "{}")
        if hello.get(Field.VERSION) != VERSION:
            raise SystemExit(f"zklock lock client: the JVM speaks format {hello.get('version')},"
                             f" this zklock {VERSION}: install the same zklock on both")
        conf = {str(k): str(v) for k, v in (hello.get(Field.CONF) or {}).items()}
        hadoop = {str(k): str(v) for k, v in (hello.get(Field.HADOOP) or {}).items()}
        settings = settings_from(conf.get, {}, hadoop=hadoop.get)
        # it connects: a ZooKeeper that cannot be reached fails the start
        self.manager = LockManager(settings=settings)
        self.manager.application = str(hello.get(Field.APPLICATION) or "")
        # a waiting statement's lines go to the JVM, which writes them where its user looks
        self.manager.say_waiting = lambda line: self.send({Field.EVENT: Event.WAITING,
                                                           Field.MESSAGE: line})
        self._delete_abandoned([str(n) for n in hello.get(Field.ABANDONED) or ()])
        self.client = EngineLockClient(None, self.manager, settings=lambda: settings,
                                       on_lost=lambda query_id: self.send(
                                           {Field.EVENT: Event.LOST, Field.QUERY_ID: query_id}))
        self.send({Field.EVENT: Event.READY, Field.PID: os.getpid(),
                   Field.PROFILE: json.loads(client_profile(settings, settings))})

    def _delete_abandoned(self, nodes: list[str]) -> None:
        """Delete the lock nodes a child before this one held when it died: the JVM failed
        their statements and refuses their commits, and ZooKeeper would keep them until that
        child's session expires. Only lock nodes under this client's root are deleted."""
        assert self.manager is not None
        root = self.manager.root.rstrip("/") + "/"
        mine = [n for n in nodes if n.startswith(root)
                and LockNodeName.parse(n.rsplit("/", 1)[-1]) is not None]
        if mine:
            self.manager.delete_nodes(mine)

    def answer(self, message: dict[str, Any]) -> None:
        assert self.client is not None
        call = message.get(Field.CALL)
        try:
            if call == Call.ACQUIRE:
                reply = self.client.acquire(json.dumps(message[Field.REQUEST]))
            elif call == Call.PARSE:
                reply = self.client.parse(json.dumps(message[Field.REQUEST]))
            elif call == Call.RELEASE:
                reply = self.client.release(str(message[Field.HANDLE]),
                                            bool(message.get(Field.FAILED)))
            elif call == Call.CANCEL:
                reply = self.client.cancel(str(message[Field.HANDLE]))
            else:
                reply = json.dumps({Field.VERSION: VERSION, Field.OUTCOME: Outcome.REFUSED,
                                    Field.MESSAGE: f"zklock: no such call {call!r}"})
        except Exception as exc:  # fail closed: the statement does not run
            reply = json.dumps({Field.VERSION: VERSION, Field.OUTCOME: Outcome.REFUSED,
                                Field.MESSAGE: f"zklock: {exc}"})
        self.send({Field.ID: message.get(Field.ID), Field.REPLY: json.loads(reply)})

    def serve(self) -> None:
        """Answer until stdin ends, then release everything and return."""
        with ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="zklock-call") as pool:
            for line in self.stdin:
                if line.strip():
                    message = json.loads(line)
                    if message.get(Field.CALL) == Call.CANCEL:  # never behind the waits
                        self.answer(message)
                    else:
                        pool.submit(self.answer, message)
        if self.manager is not None:
            self.manager.close()


def main() -> int:
    process = LockProcess(sys.stdin, sys.stdout)
    try:
        process.start()
    except SystemExit:
        raise
    except Exception as exc:  # one line, which the JVM puts in the refusal
        print(f"zklock lock client: {type(exc).__name__}: {exc}".splitlines()[0],
              file=sys.stderr)
        return 1
    process.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
