"""Staging a write left under a warehouse: what "a statement that raised wrote none, and
left nothing behind" looks for, in the writers' matrix and the Spark chaos suite."""

from __future__ import annotations

import os
from pathlib import Path


def leftover_staging(warehouse: Path) -> list[str]:
    """A ``_temporary`` with anything in it, Spark's ``.spark-staging-<job>``, Hive's
    ``.hive-staging_*``: each as a path relative to ``warehouse``.

    It walks with ``os.walk``, which, unlike ``Path.rglob``, passes over a directory removed
    while it walks: a failed job's cancelled tasks may still be deleting their staging when
    this looks (the callers wait for an empty answer)."""
    found = []
    for parent, dirs, _files in os.walk(warehouse):
        for name in dirs:
            path = Path(parent) / name
            if name.startswith((".spark-staging", ".hive-staging")) or (
                    name == "_temporary" and not _empty(path)):
                found.append(str(path.relative_to(warehouse)))
    return found


def _empty(directory: Path) -> bool:
    """Whether a directory holds nothing; one that is gone holds nothing."""
    for _parent, dirs, files in os.walk(directory):
        return not dirs and not files
    return True
