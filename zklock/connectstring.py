"""The ZooKeeper connect string: ``host[:port],...[/chroot]``, read by kazoo's own rules.

kazoo is the client that connects, so its parser (``kazoo.hosts.collect_hosts`` and the
chroot's ``normpath``) decides what a string means; zklock parses it once, here, before any
connection is tried, so that a malformed string is one ``InvalidArguments`` naming the string
and its fault rather than a ``ValueError`` traceback from inside ``KazooClient``. Where kazoo
would quietly read a string as something other than what was written, zklock refuses it:

- port 0 (kazoo takes it for "no port" and connects to 2181);
- an empty server between commas, or a host that is neither a DNS name nor an IP address
  (kazoo would spend the whole connect timeout failing to resolve it).

IPv6 addresses take brackets, as in ZooKeeper's own connect strings: ``[::1]:2181``.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any

from kazoo.hosts import collect_hosts
from kazoo.protocol.paths import normpath

from .errors import InvalidArguments

#: ZooKeeper's client port when a server names none (kazoo's and ZooKeeper's default).
DEFAULT_PORT = 2181

_DNS_LABEL = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\Z")


@dataclass(frozen=True)
class ConnectString:
    """A parsed connect string: its servers as (host, port) and its chroot ("" for none)."""

    text: str
    servers: tuple[tuple[str, int], ...]
    chroot: str

    @classmethod
    def parse(cls, value: Any) -> ConnectString:
        """Parse ``value`` as kazoo will; InvalidArguments names the string and what is
        wrong with it."""
        text = str(value).strip()

        def bad(what: str) -> InvalidArguments:
            return InvalidArguments(f"ZooKeeper connect string {text!r}: {what}"
                                    " (use host[:port],...[/chroot], IPv6 as [::1]:2181)")

        written = text.partition("/")[0].split(",")
        if not any(server.strip() for server in written):
            raise bad("names no server")
        if not all(server.strip() for server in written):
            raise bad("has an empty server between commas")
        for server in (s.strip() for s in written):
            if server.count(":") > 1 and not server.startswith("["):
                raise bad(f"{server!r} is an IPv6 address without brackets"
                          if _is_ipv6(server) or _is_ipv6(server.rpartition(":")[0])
                          else f"{server!r} has more than one ':' before its port")
        try:
            parsed, chroot = collect_hosts(text)
            chroot = normpath(chroot) if chroot else ""
        except ValueError as exc:
            raise bad(str(exc).replace("'", "")) from None
        for (host, _), server in zip(parsed, written):
            if not _is_host(host):
                raise bad(f"{server.strip()!r} does not name a host by DNS name or IP address")
            port = _port_written(server)
            if port and int(port) == 0:  # kazoo would connect to 2181 instead
                raise bad(f"{server.strip()!r} has port 0: use a port from 1 to 65535")
        return cls(text, tuple(parsed), chroot)


def _port_written(server: str) -> str:
    """The port as written after a server's last ':' (after ']' for an IPv6 address); kazoo
    has already checked that it is a number."""
    server = server.strip()
    tail = server.rsplit("]", 1)[-1] if server.startswith("[") else server
    return tail.rpartition(":")[2] if ":" in tail else ""


def _is_ipv6(text: str) -> bool:
    try:
        return ipaddress.ip_address(text).version == 6
    except ValueError:
        return False


def _is_host(host: str) -> bool:
    """An IP address, or a DNS name of ASCII labels."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    labels = host.rstrip(".").split(".")
    return (host.isascii() and 0 < len(host) <= 253
            and all(_DNS_LABEL.match(label) for label in labels))
