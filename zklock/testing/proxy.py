"""A TCP fault proxy between a client and ZooKeeper, for deterministic failures.

It forwards bytes both ways and, on command, drops every connection, holds
traffic (blackhole), delays every packet by ``delay`` seconds, refuses new
connections, or cuts the connection right after the client sends a request
containing a marker, before the reply can come back: the way to get
"connection loss in the middle of a create" on demand. It also records the session ids the
server grants through it (``sessions``), so that a test can wait for those sessions to expire
rather than sleep for a session timeout.
"""

from __future__ import annotations

import select
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Optional


class FaultProxy:
    """Listen on a loopback port and forward to ``target`` (host, port)."""

    def __init__(self, target: tuple[str, int], host: str = "127.0.0.1") -> None:
        self.target = target
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((host, 0))
        self._listener.listen(64)
        self.address = self._listener.getsockname()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self._cut_when: Optional[Callable[[bytes], bool]] = None
        self.cut_count = 0
        self.blackhole = False
        self.refuse = False
        self.delay = 0.0
        #: Every session id the server granted through this proxy (its ConnectResponse).
        self.sessions: set[int] = set()
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True, name="fault-proxy").start()

    @property
    def connect(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"

    def cut_after(self, marker: bytes) -> None:
        """Drop the connection right after forwarding a client packet containing ``marker``."""
        self.cut_when(lambda data: marker in data)

    def cut_when(self, matches: Callable[[bytes], bool]) -> None:
        """Drop the connection right after forwarding the first client packet for which
        ``matches(packet)`` is true (once)."""
        self._cut_when = matches

    def _cuts(self, data: bytes) -> bool:
        """Is this client packet the one to cut after? (Once, across every connection.)"""
        with self._lock:
            matches = self._cut_when
            if matches is None:
                return False
            try:
                hit = bool(matches(data))
            except Exception:  # a predicate that fails on a packet does not match it
                return False
            if hit:
                self._cut_when = None
                self.cut_count += 1
            return hit

    def drop_all(self) -> None:
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for a, b in pairs:
            for s in (a, b):
                try:
                    s.close()
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()
        self.drop_all()
        try:  # on Linux, close() alone does not wake a thread blocked in accept()
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._stop.is_set():
                client.close()
                return
            if self.refuse:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        socks = [client, upstream]
        answer = bytearray()  # the server's first bytes: its ConnectResponse
        try:
            while not self._stop.is_set():
                ready, _, _ = select.select(socks, [], [], 0.2)
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        raise OSError("closed")
                    if s is upstream and len(answer) < _SESSION_END:
                        answer += data
                        self._record_session(answer)
                    if self.blackhole:
                        continue
                    if self.delay:
                        time.sleep(self.delay)
                    other = upstream if s is client else client
                    other.sendall(data)
                    if s is client and self._cuts(data):
                        time.sleep(0.2)  # let the server apply it; the reply is never relayed
                        raise OSError("cut")
        except (OSError, ValueError):  # ValueError: closed by drop_all meanwhile
            pass
        finally:
            for s in socks:
                try:
                    s.close()
                except OSError:
                    pass
            with self._lock:
                if (client, upstream) in self._pairs:
                    self._pairs.remove((client, upstream))

    def _record_session(self, answer: bytearray) -> None:
        """Note the session id of a ConnectResponse (length, protocol version, timeout, then
        the session id: ZooKeeper's wire format), once its bytes have all come; a refusal
        (session id 0) grants none."""
        if len(answer) >= _SESSION_END:
            (session,) = struct.unpack_from(">q", answer, _SESSION_END - 8)
            if session:
                with self._lock:
                    self.sessions.add(session)


#: Where a ConnectResponse's session id ends: after its length, protocol version and timeout.
_SESSION_END = 20
