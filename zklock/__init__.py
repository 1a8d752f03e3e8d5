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
    LockLost,
    LockNotAcquired,
    ZkLockError,
    ZooKeeperUnavailable,
)
from .listing import LockRecord
from .lockrequest import LockTarget, normalize
from .lockset import LockSet
from .manager import LockManager
from .mode import Mode
from .objects import LockObject

__all__ = [
    "ExceedsMaxLeaseTime",
    "InvalidArguments",
    "InvalidLockObject",
    "LeaseAlreadyExists",
    "LockLost",
    "LockManager",
    "LockNotAcquired",
    "LockObject",
    "LockRecord",
    "LockSet",
    "LockTarget",
    "Mode",
    "Settings",
    "ZkLockError",
    "ZooKeeperUnavailable",
    "normalize",
]

__version__ = "0.1.0"
