"""Releases sent without waiting, and this process's next request in another session
(zklock/locks/pending.py)."""

from __future__ import annotations


def test_a_release_sent_without_waiting_is_answered_before_another_sessions_request(
        make_manager) -> None:
    """ZooKeeper orders one session's requests, not two sessions': another manager of the
    same process, asking right after a release it did not wait for, would otherwise race
    the release's delete (found as a denial by a holder 'that has since released')."""
    first, second = make_manager(), make_manager()  # retries=0: any overlap is a denial
    for _ in range(200):
        first.acquire([("pending.t", "X")]).release(wait=False)
        second.acquire([("pending.t", "X")]).release(wait=False)
