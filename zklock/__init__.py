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
from .lease import Lease
from .listing import LockRecord
from .lockrequest import LockTarget, normalize
from .lockset import LockSet
from .manager import LockManager
from .mode import Mode
from .objects import LockObject
from .reaper import LeaseReaper
from .renewer import LeaseRenewer

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
