"""A random order of the tests within each file, for ``make flake-hunt`` (scripts/
flake_hunt.py sets ZKLOCK_SHUFFLE_SEED): a test that passes only after another of its file
has run assumes an order that nothing guarantees. Files keep their order, so that
pytest-xdist's ``--dist loadfile`` still gives each file to one worker, and module- and
session-scoped fixtures are still set up once."""

from __future__ import annotations

import os
import random

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seed = os.environ.get("ZKLOCK_SHUFFLE_SEED")
    if not seed:
        return
    rng = random.Random(int(seed))
    by_file: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_file.setdefault(str(item.path), []).append(item)
    items[:] = []
    for tests in by_file.values():
        rng.shuffle(tests)
        items.extend(tests)
