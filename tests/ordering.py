"""The order the suite runs in. Files: the longest first (LONGEST_FIRST), so that `make
test`'s workers, which take a file at a time (pytest-xdist's ``--dist loadfile``), do not
end with one of them running alone. Tests within a file: as written, or, for ``make
flake-hunt`` (scripts/flake_hunt.py sets ZKLOCK_SHUFFLE_SEED), in a random order, since a
test that passes only after another of its file has run assumes an order that nothing
guarantees. Files stay whole, so module- and session-scoped fixtures are set up once."""

from __future__ import annotations

import os
import random

import pytest

#: The suite's longest files, each minutes of one worker (Spark applications of their own,
#: servers, chaos).
LONGEST_FIRST = ("spark/test_lock_process.py", "spark/test_concurrent_writers.py",
                 "cli/test_thrift_server.py", "spark/test_local_cluster.py",
                 "spark/test_spark_connect_server.py", "core/test_chaos.py",
                 "spark/test_shared_metastore.py", "scripts/test_build_dist.py",
                 "scheduler/test_scheduler_processes.py", "spark/test_settings_precedence.py")


def rank(path: str) -> int:
    return next((i for i, name in enumerate(LONGEST_FIRST) if path.endswith(name)),
                len(LONGEST_FIRST))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    by_file: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_file.setdefault(str(item.path), []).append(item)
    seed = os.environ.get("ZKLOCK_SHUFFLE_SEED")
    rng = random.Random(int(seed)) if seed else None
    items[:] = []
    for path in sorted(by_file, key=rank):  # stable: other files keep their order
        tests = by_file[path]
        if rng is not None:
            rng.shuffle(tests)
        items.extend(tests)
