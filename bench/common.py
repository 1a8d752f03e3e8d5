"""What every benchmark needs: a ZooKeeper, ZKLOCK_ZK's when set, else one of its own."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zklock.server import ZkServer, free_port  # noqa: E402


def start_zookeeper(**server_args: Any) -> tuple[str, Optional[ZkServer]]:
    """(connect string, the server to stop afterwards or None when ZKLOCK_ZK was given)."""
    hosts = os.environ.get("ZKLOCK_ZK")
    if hosts:
        return hosts, None
    server = ZkServer(Path(tempfile.mkdtemp(prefix="zklock-bench-")), port=free_port(),
                      **server_args)
    return server.start(), server
