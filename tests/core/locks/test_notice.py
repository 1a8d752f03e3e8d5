"""A waiting request says so on stderr (zklock/locks/notice.py), against a real ZooKeeper."""

from __future__ import annotations

import io
import re
import threading
import time

import pytest
from conftest import wait_for

from zklock import LockNotAcquired
from zklock.locks.notice import WaitNotice


def test_a_request_behind_a_holder_says_whom_it_waits_for_at_its_first_denial(
        make_manager, capfd):
    holder, waiter = make_manager(), make_manager(retries=None, timeout=60)
    held = holder.acquire([("sales.orders", "X")], query_id="backfill-42")
    got = []
    thread = threading.Thread(target=lambda: got.append(waiter.acquire(
        [("sales.orders", "S")], query="SELECT * FROM sales.orders")))
    began = time.monotonic()
    thread.start()
    # the line comes with the first denial, before any retry interval has passed
    lines: list[str] = []
    assert wait_for(lambda: lines.extend(capfd.readouterr().err.splitlines())
                    or any("waits for" in ln for ln in lines), timeout=30)
    held.release()
    waited = time.monotonic() - began
    thread.join(30)
    assert got and got[0].is_valid
    got[0].release()
    said = [ln for ln in lines if "waits for" in ln]
    # once, and again only as the wait doubles past 5 s: not once an attempt
    said += [ln for ln in capfd.readouterr().err.splitlines() if "waits for" in ln]
    assert 1 <= len(said) <= 1 + sum(waited >= t for t in (5, 10, 20, 40)), (said, waited)
    assert said[0].startswith("zklock: SELECT * FROM sales.orders waits for S on"
                              " sales.orders: sales.orders (S requested) is held in X by"), said
    assert "query backfill-42" in said[0] and re.search(r"; \d+ s so far$", said[0]), said


def test_the_setting_turns_it_off(make_manager, capfd):
    holder, waiter = make_manager(), make_manager(retries=2, wait_notice=False)
    with holder.acquire([("sales.orders", "X")]):
        with pytest.raises(LockNotAcquired, match="is held in X"):  # names it as ever
            waiter.acquire([("sales.orders", "X")])
    assert "waits for" not in capfd.readouterr().err


def test_it_says_again_at_a_growing_interval():
    now = [100.0]
    out = io.StringIO()
    notice = WaitNotice("INSERT INTO w VALUES (1)", say=lambda line: out.write(line + "\n"),
                        clock=lambda: now[0])
    for t in [0, 0.05, 1, 4.9, 5, 6, 9.9, 10, 19, 20, 41]:
        now[0] = 100.0 + t
        notice.denied([("default.w", "X")], "default.w (X requested) is held in X by user"
                      " etl@host")
    times = [ln.rsplit(";", 1)[1] for ln in out.getvalue().splitlines()]
    assert times == [" 0 s so far", " 5 s so far", " 10 s so far", " 20 s so far",
                     " 41 s so far"], times
