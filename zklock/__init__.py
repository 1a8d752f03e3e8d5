"""zklock: Hive's concurrency model for PySpark pipelines, coordinated by ZooKeeper.

Shared and exclusive locks on databases, tables and partitions, all-or-none,
hierarchical, with fencing tokens and session awareness.
"""

from .config import Settings
from .errors import (
    ExceedsMaxLeaseTime,
    InvalidArguments,
    InvalidLockObject,
    LeaseAlreadyExists,
    LeaseNotFound,
    LockLost,
    LockNotAcquired,
    NotLeaseHolder,
    WriteFailed,
    ZkLockError,
    ZooKeeperUnavailable,
)
from .leases.lease import Lease
from .leases.reaper import LeaseReaper
from .leases.renewer import LeaseRenewer
from .locks.listing import LockRecord
from .locks.lockrequest import LockTarget, normalize
from .locks.lockset import LockSet
from .locks.mode import Mode
from .locks.objects import LockObject
from .manager import LockManager

__all__ = [
    "ExceedsMaxLeaseTime",
    "InvalidArguments",
    "InvalidLockObject",
    "Lease",
    "LeaseAlreadyExists",
    "LeaseNotFound",
    "LeaseReaper",
    "LeaseRenewer",
    "LockLost",
    "LockManager",
    "LockNotAcquired",
    "LockObject",
    "LockRecord",
    "LockSet",
    "LockTarget",
    "Mode",
    "NotLeaseHolder",
    "Settings",
    "WriteFailed",
    "ZkLockError",
    "ZooKeeperUnavailable",
    "normalize",
]

__version__ = "0.1.0"
