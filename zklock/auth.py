"""Credentials and ACLs: who zklock is to ZooKeeper, and who may touch its nodes.

Credentials (``user:password``, ZooKeeper's digest scheme) come from an
environment variable or a file, never from a command-line argument that
``ps`` would show: ``ZKLOCK_AUTH`` or ``auth_file`` for the identity that
pipelines and schedulers share, ``ZKLOCK_ADMIN_AUTH`` or
``admin_auth_file`` for the admin identity that force-drop and the lease
reaper need. When credentials are set, every node zklock creates carries
an ACL: the user may read, write, create and delete; the admin (by its
public digest, ``acl_admin_digest``, or its own credentials) may do
everything; anyone else, authenticated or not, nothing.

ZooKeeper checks delete permission on the parent, so within the shared
identity it cannot tell one holder's lock node from another's: that
force-drop needs the admin identity is enforced by zklock, while the ACL
keeps every foreign client out.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from kazoo.security import ACL, Id, Permissions, make_digest_acl, make_digest_acl_credential

from .config import Settings
from .errors import InvalidArguments, NotAuthorized


@dataclass(frozen=True)
class Credentials:
    """A digest identity; the password never shows in a repr or a message."""

    user: str
    password: str = field(repr=False)

    @property
    def auth_data(self) -> tuple[str, str]:
        return ("digest", f"{self.user}:{self.password}")

    @property
    def digest(self) -> str:
        """``user:base64(sha1(user:password))``, what an ACL names (not a secret)."""
        return make_digest_acl_credential(self.user, self.password)

    @classmethod
    def parse(cls, text: str, source: str) -> Credentials:
        user, sep, password = text.strip().partition(":")
        if not sep or not user or not password:
            raise InvalidArguments(f"{source} must hold user:password")
        return cls(user, password)


def load(env_var: str, file_setting: Optional[str],
         environ: Optional[Mapping[str, str]] = None) -> Optional[Credentials]:
    environ = os.environ if environ is None else environ
    if environ.get(env_var):
        return Credentials.parse(environ[env_var], env_var)
    if file_setting:
        try:
            text = Path(file_setting).read_text().splitlines()
        except OSError as exc:
            raise InvalidArguments(f"cannot read credentials file {file_setting}:"
                                   f" {exc.strerror}") from None
        first = next((ln for ln in text if ln.strip() and not ln.startswith("#")), "")
        return Credentials.parse(first, f"credentials file {file_setting}")
    return None


@dataclass(frozen=True)
class Identity:
    """This process's identities and the ACL of the nodes it creates."""

    user: Optional[Credentials]
    admin: Optional[Credentials]
    admin_digest: Optional[str]
    scheme: str = "digest"

    @classmethod
    def from_settings(cls, settings: Settings) -> Identity:
        return cls(load("ZKLOCK_AUTH", settings.auth_file),
                   load("ZKLOCK_ADMIN_AUTH", settings.admin_auth_file),
                   settings.acl_admin_digest, settings.auth_scheme)

    def client_args(self) -> dict[str, Any]:
        """KazooClient arguments: digest auth data, or SASL options (one identity: SASL
        authenticates a connection once; the admin's credentials win when both are set)."""
        if self.scheme == "sasl":
            creds = self.admin or self.user
            if creds is None:
                return {}
            return {"sasl_options": {"mechanism": "DIGEST-MD5", "username": creds.user,
                                     "password": creds.password}}
        return {"auth_data": self.auth_data() or None}

    @property
    def enabled(self) -> bool:
        return self.user is not None or self.admin is not None

    def auth_data(self) -> list[tuple[str, str]]:
        return [c.auth_data for c in (self.user, self.admin) if c is not None]

    def acl(self) -> Optional[list[ACL]]:
        if not self.enabled:
            return None
        if self.scheme == "sasl":
            return self._sasl_acl()
        out = []
        if self.user is not None:
            out.append(make_digest_acl(self.user.user, self.user.password, read=True,
                                       write=True, create=True, delete=True))
        admin = self.admin.digest if self.admin is not None else self.admin_digest
        if admin:
            out.append(ACL(Permissions.ALL, Id("digest", admin)))
        return out

    def _sasl_acl(self) -> list[ACL]:
        """SASL ACLs name users: the shared one (read/write/create/delete), the admin (all)."""
        out = []
        rwcd = Permissions.READ | Permissions.WRITE | Permissions.CREATE | Permissions.DELETE
        if self.user is not None:
            out.append(ACL(rwcd, Id("sasl", self.user.user)))
        admin = self.admin.user if self.admin is not None else (
            self.admin_digest.split(":", 1)[0] if self.admin_digest else None)
        if admin:
            out.append(ACL(Permissions.ALL, Id("sasl", admin)))
        return out

    def require_admin(self, what: str) -> None:
        """Admin operations need the admin identity once ZooKeeper auth is in use."""
        if self.enabled and self.admin is None:
            raise NotAuthorized(f"{what} needs the admin identity: set ZKLOCK_ADMIN_AUTH or"
                                " admin_auth_file (ZKLOCK_ADMIN_AUTH_FILE)")
