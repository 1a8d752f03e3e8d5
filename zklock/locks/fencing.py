"""FencedResource: a resource that rejects writes from holders whose lock was taken over.

A lock alone cannot stop a holder that was paused (a GC pause, SIGSTOP, a
partition) past its session: it wakes up believing it still holds the lock
while someone else does. The fencing token (the grant's zxid, which only
grows) lets the resource tell them apart: it remembers the highest token it
accepted and refuses lower ones (Kleppmann's fencing; what Curator and
kazoo leave to the user). Here the resource's state is a znode and each
write is a versioned compare-and-set, so two writers can never both pass
the check.
"""

from __future__ import annotations

from typing import Optional

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from ..errors import ZkLockError


class StaleToken(ZkLockError):
    """A write carried a fencing token lower than one the resource already accepted."""

    def __init__(self, token: int, highest: int, zxid: int = 0) -> None:
        self.token, self.highest, self.zxid = token, highest, zxid
        super().__init__(f"fencing token {token} is stale: the resource has seen {highest}")


def _data(token: int, payload: bytes) -> bytes:
    return str(int(token)).encode() + b"\n" + payload


class FencedResource:
    """The highest accepted token (and the last payload) of one resource, at ``path``."""

    def __init__(self, client: KazooClient, path: str) -> None:
        self.client = client
        self.path = path

    def highest(self) -> Optional[int]:
        try:
            raw, _ = self.client.get(self.path)
        except NoNodeError:
            return None
        return int(raw.split(b"\n", 1)[0] or 0)

    def observe(self, token: int) -> int:
        """A reader's visit: raise the highest token seen without changing the payload, so a
        writer whose lock was taken over by this reader is refused from now on. Never
        refuses: readers may overlap each other in any token order.

        Returns the zxid of the resource state the visit left or found: every write the
        resource accepts after this visit has a larger one."""
        try:
            return self.write(token, None)
        except StaleToken as exc:
            return exc.zxid

    def write(self, token: int, payload: Optional[bytes] = b"") -> int:
        """Record ``payload`` under ``token``; raise :class:`StaleToken` if a higher token
        wrote first. Equal tokens pass: one holder may write many times.

        Returns the zxid at which the write took effect (the resource's own order, which
        tells "before the new holder's first visit" from "after" exactly, where client
        clocks cannot)."""
        while True:
            try:
                raw, stat = self.client.get(self.path)
            except NoNodeError:
                try:
                    _, created = self.client.create(self.path, _data(token, payload or b""),
                                                    makepath=True, include_data=True)
                    return int(created.mzxid)
                except NodeExistsError:
                    continue
            head, _, old = raw.partition(b"\n")
            highest = int(head or 0)
            if token < highest:
                raise StaleToken(token, highest, int(stat.mzxid))
            if payload is None and token == highest:
                return int(stat.mzxid)  # nothing to raise
            data = _data(max(token, highest), old if payload is None else payload)
            try:
                return int(self.client.set(self.path, data, version=stat.version).mzxid)
            except BadVersionError:
                continue  # another writer got in between: look again
