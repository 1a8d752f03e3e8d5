"""The ZooKeeper protocol zklock speaks, in one place.

Everything that sends a request to ZooKeeper goes through :class:`ZkOps`:
batched reads (multiRead, or pipelined async requests on servers before
3.6), multi transactions chunked under jute.maxbuffer, and best-effort
cleanup.

Why a request class of our own: a grant's fencing token is the czxid of its
lock nodes, and it must come without an extra round trip. A multi is one
transaction, so every node it creates has the multi's zxid as czxid, and
ZooKeeper sends that zxid in the reply header. kazoo's ``Transaction`` drops
the header before its parser runs, so :class:`Multi2` (same wire format)
reads it from the bytes just before the body and hands it back as
:class:`MultiZxid`. (ZooKeeper 3.8 answers ``create2`` inside a multi with a
plain create result, without the stat, so the header is the only source.)

Why this module reads kazoo's private attributes (and no other module does):
pipelining. kazoo offers one request per call, and ``client._call`` wakes its
connection thread with one syscall per request; :meth:`ZkOps._submit_many` puts
a batch on ``client._queue`` and wakes the thread once through
``client._connection._write_sock``, checking ``client._state`` first (and falling
back to ``client._call`` when not connected, for kazoo's own error). That is what
keeps a set of N objects at a constant number of round trips and syscalls
(docs/design.md); kazoo has no public API for it, so these few lines follow its
internals (kazoo >= 2.9, as setup.cfg requires).
"""

from __future__ import annotations

import struct
from collections import namedtuple
from collections.abc import Iterable, Sequence
from typing import Any, Optional

from kazoo.client import KazooClient
from kazoo.exceptions import (
    EXCEPTIONS,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
    UnimplementedError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.serialization import (
    CheckVersion,
    Create,
    Create2,
    Delete,
    Exists,
    GetChildren,
    GetData,
    MultiHeader,
    SetData,
    int_struct,
    multiheader_struct,
    read_buffer,
    read_string,
    stat_struct,
)
from kazoo.protocol.states import KeeperState, ZnodeStat
from kazoo.retry import KazooRetry
from kazoo.security import OPEN_ACL_UNSAFE

from .errors import ZkLockError

#: What a request raises when ZooKeeper could not be reached, or not in time (a server
#: failing over, a network cut): worth retrying, unlike an error ZooKeeper answered with.
CONNECTION_ERRORS = (ConnectionLoss, SessionExpiredError, KazooTimeoutError)

PERSISTENT = 0
EPHEMERAL = 1
SEQUENTIAL = 2
CONTAINER = 4


class CreateContainer(Create):
    """createContainer (ZooKeeper 3.5+): a node the server deletes once its last child goes.

    Object nodes are containers, so empty ones disappear without any client
    round trip at release; a create racing that removal gets NoNode and retries.
    """

    type = 19

# Stay well under the default jute.maxbuffer (1 MiB, ~0xfffff) per request.
MAX_MULTI_BYTES = 512 * 1024


def serialize_ops(operations: Sequence[Any]) -> bytes:
    """The body shared by multi and multiRead: a header per op, then an end marker."""
    b = bytearray()
    for op in operations:
        b.extend(MultiHeader(op.type, False, -1).serialize() + op.serialize())
    return bytes(b + multiheader_struct.pack(-1, True, -1))


class Multi2(namedtuple("Multi2", "operations")):
    """A multi that also returns its transaction's zxid and parses createContainer results."""

    type = 14

    def serialize(self) -> bytes:
        return serialize_ops(self.operations)

    @classmethod
    def deserialize(cls, data: bytes, offset: int) -> list:
        # ReplyHeader (xid:int, zxid:long, err:int) sits right before the body.
        zxid = struct.unpack_from("!q", data, offset - 12)[0]
        header, offset = MultiHeader.deserialize(data, offset)
        results: list = []
        while not header.done:
            if header.type == Create.type:
                path, offset = read_string(data, offset)
                results.append(path)
            elif header.type in (Create2.type, 19):  # create2, createContainer
                path, offset = read_string(data, offset)
                stat = ZnodeStat._make(stat_struct.unpack_from(data, offset))
                offset += stat_struct.size
                results.append((path, stat))
            elif header.type in (Delete.type, CheckVersion.type):
                results.append(True)
            elif header.type == SetData.type:
                results.append(ZnodeStat._make(stat_struct.unpack_from(data, offset)))
                offset += stat_struct.size
            elif header.type == -1:
                err = int_struct.unpack_from(data, offset)[0]
                offset += int_struct.size
                results.append(EXCEPTIONS[err]())
            header, offset = MultiHeader.deserialize(data, offset)
        results.append(MultiZxid(zxid))
        return results


class MultiRead(namedtuple("MultiRead", "operations")):
    """ZooKeeper 3.6+ multiRead: many getChildren/getData in one request and one reply.

    kazoo has no API for it. Pipelining N separate reads through kazoo costs
    about 0.3 ms of client time per request; one multiRead of N reads costs a
    few microseconds per read, which is what makes large lock sets cheap.
    Each op answers on its own (no atomicity), with an error result for a
    missing node.
    """

    type = 22

    def serialize(self) -> bytes:
        return serialize_ops(self.operations)

    @classmethod
    def deserialize(cls, data: bytes, offset: int) -> list:
        header, offset = MultiHeader.deserialize(data, offset)
        results: list = []
        while not header.done:
            if header.type == GetChildren.type:
                count = int_struct.unpack_from(data, offset)[0]
                offset += int_struct.size
                kids = []
                for _ in range(max(count, 0)):
                    kid, offset = read_string(data, offset)
                    kids.append(kid)
                results.append(kids)
            elif header.type == GetData.type:
                value, offset = read_buffer(data, offset)
                stat = ZnodeStat._make(stat_struct.unpack_from(data, offset))
                offset += stat_struct.size
                results.append((value, stat))
            elif header.type == -1:
                err = int_struct.unpack_from(data, offset)[0]
                offset += int_struct.size
                results.append(EXCEPTIONS[err]())
            header, offset = MultiHeader.deserialize(data, offset)
        return results


MULTI_READ_CHUNK = 500  # reads per multiRead: keeps replies well under jute.maxbuffer


class MultiZxid(int):
    """The zxid of a multi's transaction: the czxid of every node it created."""


class MultiFailed(ZkLockError, KazooException):
    """A multi was rolled back; ``error`` is the op error that caused it (still a
    KazooException, so callers catching ZooKeeper errors see it as one)."""

    def __init__(self, error: BaseException, index: int, results: list) -> None:
        self.error = error
        self.index = index
        self.results = results
        super().__init__(f"multi op {index} failed: {type(error).__name__}")


def op_size(op: Any) -> int:
    data = getattr(op, "data", b"") or b""
    return len(op.path.encode()) + len(data) + 64


def chunk_ops(ops: Sequence[Any], limit: int = MAX_MULTI_BYTES) -> list[list[Any]]:
    """Split ops into multis of at most ``limit`` bytes, keeping order."""
    chunks: list[list[Any]] = [[]]
    size = 0
    for op in ops:
        s = op_size(op)
        if chunks[-1] and size + s > limit:
            chunks.append([])
            size = 0
        chunks[-1].append(op)
        size += s
    return [c for c in chunks if c]


def connect_string(client: KazooClient) -> str:
    """``client``'s connect string as any ZooKeeper client takes it: ``host:port,...`` and
    its chroot (IPv6 hosts in brackets)."""
    hosts = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in client.hosts)
    return hosts + (client.chroot or "")


class ZkOps:
    """Pipelined reads, multis and cleanup on one started KazooClient."""

    def __init__(self, client: KazooClient, timeout: float = 30.0) -> None:
        self.client = client
        self.timeout = timeout
        self._multi_read = True
        self.retry = KazooRetry(max_tries=-1, delay=0.05, max_delay=1.0, deadline=timeout,
                                ignore_expire=False)

    # ---- paths ----------------------------------------------------------
    def _abs(self, path: str) -> str:
        chroot = self.client.chroot or ""
        return chroot + path if chroot else path

    def _rel(self, path: str) -> str:
        chroot = self.client.chroot or ""
        if chroot and path.startswith(chroot):
            return path[len(chroot):] or "/"
        return path

    # ---- op builders ----------------------------------------------------
    def create_op(self, path: str, data: bytes = b"", flags: int = PERSISTENT) -> Create2:
        acl = self.client.default_acl or OPEN_ACL_UNSAFE
        return Create2(self._abs(path), data, acl, flags)

    def container_op(self, path: str) -> CreateContainer:
        acl = self.client.default_acl or OPEN_ACL_UNSAFE
        return CreateContainer(self._abs(path), b"", acl, CONTAINER)

    def delete_op(self, path: str, version: int = -1) -> Delete:
        return Delete(self._abs(path), version)

    def set_op(self, path: str, data: bytes, version: int = -1) -> SetData:
        return SetData(self._abs(path), data, version)

    # ---- multi ------------------------------------------------------------
    def multi_async(self, ops: Sequence[Any]) -> Any:
        return self._submit_many([Multi2(list(ops))])[0]

    def multi(self, ops: Sequence[Any]) -> tuple[list, int]:
        """Run one multi: (per-op results, the transaction's zxid).

        Raises :class:`MultiFailed`, naming the failing op, if it was rolled back.
        """
        if not ops:
            return [], 0
        return self.check_multi(self.multi_async(ops).get(timeout=self.timeout))

    def check_multi(self, results: list) -> tuple[list, int]:
        """A multi's raw reply as (per-op results, zxid); :class:`MultiFailed` if it was
        rolled back. For a reply awaited elsewhere (:meth:`multi_async`)."""
        zxid = 0
        if results and isinstance(results[-1], MultiZxid):
            zxid = int(results.pop())
        for i, r in enumerate(results):
            if isinstance(r, BaseException) and not isinstance(
                    r, (RolledBackError, RuntimeInconsistency)):
                raise MultiFailed(r, i, results)
        return [self._rel(r) if isinstance(r, str) else r for r in results], zxid

    def multi_chunked(self, ops: Sequence[Any]) -> tuple[list, list[int]]:
        """Run ops as as few multis as jute.maxbuffer allows, pipelined.

        Returns the per-op results and, per op, the zxid of its multi. Atomic
        only when it fits in one multi; callers that chunk must clean up what
        earlier chunks did when a later one fails.
        """
        chunks = chunk_ops(ops)
        if len(chunks) == 1:
            results, zxid = self.multi(chunks[0])
            return results, [zxid] * len(results)
        pending = self._submit_many([Multi2(c) for c in chunks])
        out: list = []
        zxids: list[int] = []
        error: Optional[BaseException] = None
        for c, p in zip(chunks, pending):
            try:
                results, zxid = self.check_multi(p.get(timeout=self.timeout))
                out.extend(results)
                zxids.extend([zxid] * len(results))
            except Exception as exc:  # rolled back, connection loss and the like
                error = error or (exc.error if isinstance(exc, MultiFailed) else exc)
                out.extend([exc] * len(c))
                zxids.extend([0] * len(c))
        if error is not None:
            raise ChunkedMultiFailed(error, out)
        return out, zxids

    def multi_and_children(self, ops: Sequence[Any], paths: Sequence[str],
                           stat_paths: Sequence[str] = ()) -> tuple[list, list[int], Any, Any]:
        """:meth:`multi_chunked`, with a getChildren of ``paths`` (and a getData of
        ``stat_paths``, for their stats) pipelined right behind it.

        ZooKeeper serves one session's requests in order, so the read sees
        the state just after the multi, and both cost one round trip instead
        of two. Returns (results, zxids, children, stats) where ``children()`` gives
        what :meth:`children_many` would (None for a missing node) and ``stats()`` the
        ZnodeStat of each of ``stat_paths`` it could read in that round trip (none where
        the multi or the read was split: what it does not give is not known).
        """
        chunks = chunk_ops(ops)
        reads_n = len(paths) + len(stat_paths)
        if (len(chunks) != 1 or not self._multi_read or not paths
                or reads_n > MULTI_READ_CHUNK):
            results, zxids = self.multi_chunked(ops)
            return results, zxids, lambda: self.children_many(paths), dict
        reads = [GetChildren(self._abs(p), None) for p in paths]
        reads += [GetData(self._abs(p), None) for p in stat_paths]
        multi_f, read_f = self._submit_many([Multi2(list(ops)), MultiRead(reads)])
        results, zxid = self.check_multi(multi_f.get(timeout=self.timeout))
        got: list = []

        def read() -> list:
            if not got:
                got.append(read_f.get(timeout=self.timeout))
            return got[0]

        def children() -> dict[str, Optional[list[str]]]:
            try:
                listed = read()
            except UnimplementedError:
                self._multi_read = False
                return self.children_many(paths)
            return _by_path(paths, listed[:len(paths)])

        def stats() -> dict[str, ZnodeStat]:
            try:
                listed = read()
            except (UnimplementedError, *CONNECTION_ERRORS):
                return {}
            return {p: r[1] for p, r in zip(stat_paths, listed[len(paths):])
                    if isinstance(r, tuple)}
        return results, [zxid] * len(results), children, stats

    # ---- pipelining ----------------------------------------------------------
    def _submit_many(self, requests: Sequence[Any]) -> list[Any]:
        """Queue many requests and wake kazoo's connection thread once for all of them.

        ``client._call`` writes one wake-up byte per request with a syscall
        each, which costs more than the requests themselves on large sets; the
        connection thread consumes one byte per request, so one ``sendall`` of
        N bytes is equivalent.
        """
        client = self.client
        results = [client.handler.async_result() for _ in requests]
        if client._state != KeeperState.CONNECTED and client._state != KeeperState.CONNECTING:
            for r, a in zip(requests, results):
                client._call(r, a)  # sets the proper exception (closed, expired, auth)
            return results
        client._queue.extend(zip(requests, results))
        write_sock = client._connection._write_sock
        try:
            write_sock.sendall(b"\0" * len(requests))
        except (AttributeError, OSError):
            for a in results:
                if not a.ready():
                    a.set_exception(ConnectionClosedError("Connection has been closed"))
        return results

    def _read_many(self, requests: list[Any]) -> list[Any]:
        """Per-request results (value or exception) using multiRead, pipelined in chunks."""
        if self._multi_read:
            chunks = [requests[i:i + MULTI_READ_CHUNK]
                      for i in range(0, len(requests), MULTI_READ_CHUNK)]
            pending = self._submit_many([MultiRead(c) for c in chunks])
            out: list[Any] = []
            try:
                for a in pending:
                    out.extend(a.get(timeout=self.timeout))
                return out
            except UnimplementedError:
                self._multi_read = False  # ZooKeeper < 3.6
        pending = self._submit_many(requests)
        out = []
        for a in pending:
            try:
                out.append(a.get(timeout=self.timeout))
            except NoNodeError as exc:
                out.append(exc)
        return out

    def _reads(self, paths: Iterable[str], kind: Any) -> dict[str, Any]:
        paths = list(dict.fromkeys(paths))
        return _by_path(paths, self._read_many([kind(self._abs(p), None) for p in paths]))

    def _collect(self, paths: list[str], pending: list[Any], missing: Any = None) -> dict:
        out = {}
        for p, a in zip(paths, pending):
            try:
                out[p] = a.get(timeout=self.timeout)
            except NoNodeError:
                out[p] = missing
        return out

    def children_many(self, paths: Iterable[str]) -> dict[str, Optional[list[str]]]:
        """getChildren on every path in one round trip; None where the node is missing."""
        return self._reads(paths, GetChildren)

    def get_many(self, paths: Iterable[str]) -> dict[str, Optional[tuple[bytes, ZnodeStat]]]:
        """getData on every path in one round trip; None where the node is missing."""
        return self._reads(paths, GetData)

    def exists_many(self, paths: Iterable[str]) -> dict[str, Optional[ZnodeStat]]:
        paths = list(dict.fromkeys(paths))
        return self._collect(paths, self._submit_many([Exists(self._abs(p), None) for p in paths]))

    def delete_many(self, paths: Iterable[str]) -> list[str]:
        """Delete each path, in order, one round trip; ignore missing and non-empty nodes.

        Returns the paths actually deleted. Requests of one session are
        processed in order, so children listed first go before their parents.
        """
        paths = list(dict.fromkeys(paths))
        pending = self._submit_many([Delete(self._abs(p), -1) for p in paths])
        deleted = []
        for p, a in zip(paths, pending):
            try:
                a.get(timeout=self.timeout)
                deleted.append(p)
            except (NoNodeError, NotEmptyError):
                pass
        return deleted

    def ensure_path(self, path: str) -> None:
        self.retry(self.client.ensure_path, path)

    def with_retry(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        """Run an idempotent call, riding out connection loss until the deadline."""
        return self.retry.copy()(func, *args, **kwargs)


def _by_path(paths: Sequence[str], results: Sequence[Any]) -> dict[str, Any]:
    """Per-path read results: the value, None for a missing node; other errors raise."""
    out: dict[str, Any] = {}
    for p, r in zip(paths, results):
        if isinstance(r, NoNodeError):
            out[p] = None
        elif isinstance(r, BaseException):
            raise r
        else:
            out[p] = r
    return out


class ChunkedMultiFailed(KazooException):
    """One chunk of a chunked multi failed; ``results`` has an entry per op."""

    def __init__(self, error: BaseException, results: list) -> None:
        self.error = error
        self.results = results
        super().__init__(f"chunked multi failed: {error!r}")

