"""The ZooKeeper connect string: ``host[:port],...[/chroot]``, read by kazoo's own rules.

kazoo is the client that connects, so its parser (``kazoo.hosts.collect_hosts`` and the
chroot's ``normpath``) decides what a string means; zklock parses it once, here, before any
connection is tried, so that a malformed string is one ``InvalidArguments`` naming the string
and its fault rather than a ``ValueError`` traceback from inside ``KazooClient``.

kazoo reads each server as the network location of a URL, which forgives more than a connect
string should: a user part (``ops@zk1``), a query or fragment (``zk1#:2182`` connects to
zk1:2181), tabs and newlines (dropped), port 0 and an empty port (both become 2181), and any
text as a host name. ZooKeeper's own client accepts none of these, so zklock refuses them too,
and hosts that would reach somewhere else than written or nowhere at all: a number-like host
that is not a dotted IPv4 address (``127.1``, ``2130706433``, ``010.0.0.1``: the system
resolver reads them as other addresses) and a host that is not an ASCII DNS name. IPv6
addresses take brackets, as in ZooKeeper's connect strings: ``[::1]:2181``.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any

from kazoo.hosts import collect_hosts
from kazoo.protocol.paths import normpath

from .errors import InvalidArguments

#: One server as ZooKeeper writes it: a DNS name, an IPv4 address or a bracketed IPv6
#: address, then optionally ':' and a port.
_SERVER = re.compile(
    r"(?P<host>\[[0-9A-Fa-f:.%]+\]|[A-Za-z0-9._-]+)(?P<colon>:(?P<port>[0-9]{0,5}))?\Z")
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
        for server in written:
            if not server.strip():
                raise bad("has an empty server between commas")
            fault = _fault(server)
            if fault:
                raise bad(f"{server!r} {fault}")
        try:
            parsed, chroot = collect_hosts(text)
            chroot = normpath(chroot) if chroot else ""
        except ValueError as exc:
            raise bad(str(exc).replace("'", "")) from None
        if any(not ch.isprintable() for ch in chroot):
            raise bad("its chroot holds a control character")
        return cls(text, tuple(parsed), chroot)


def _fault(server: str) -> str:
    """What is wrong with one server of a connect string ("" when nothing)."""
    match = _SERVER.match(server)
    if match is None:
        if server.count(":") > 1 and not server.startswith("[") and (
                _is_ip(server, 6) or _is_ip(server.rpartition(":")[0], 6)):
            return "is an IPv6 address without brackets"
        if server.count(":") > 1 and not server.startswith("["):
            return "has more than one ':' before its port"
        return "is not host[:port] (a DNS name, an IPv4 address or [IPv6], and digits)"
    host, port = match.group("host"), match.group("port")
    if match.group("colon") and not port:
        return "has an empty port"
    if port and not 0 < int(port) < 65536:
        return "has a port outside 1 to 65535"
    if host.startswith("["):
        return "" if _is_ip(host[1:-1], 6) else "has brackets around no IPv6 address"
    labels = host.rstrip(".").split(".")
    if labels[-1].isdigit():  # a number-like host must be a dotted IPv4 address
        return "" if _is_ip(host, 4) else "is neither a dotted IPv4 address nor a DNS name"
    if len(host) > 253 or not all(_DNS_LABEL.match(label) for label in labels):
        return "does not name a host by DNS name or IP address"
    return ""


def _is_ip(text: str, version: int) -> bool:
    try:
        return ipaddress.ip_address(text).version == version
    except ValueError:
        return False
