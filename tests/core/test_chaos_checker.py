"""The chaos checker's rules, on hand-made records (it judges recorded runs; no ZooKeeper).

An overlap of incompatible sections is excused only when the earlier holder was told
of its loss before the later one started and the resource, in its own (zxid) order,
accepted none of the earlier holder's writes after the later holder's first visit.
"""

from __future__ import annotations

from zklock.testing.chaos import check


def section(client: str, mode: str, token: int, start: float, end: float,
            lost_at: float | None = None, writes=(), touched=None) -> dict:
    return {"kind": "section", "client": client, "locks": [["db.t/p=1", mode]],
            "token": token, "start": start, "end": end, "lost_at": lost_at,
            "writes": [list(w) for w in writes], "touched": touched or {}, "asked": start}


def test_disjoint_sections_pass():
    rep = check([section("a", "X", 10, 0, 1), section("b", "X", 20, 1.5, 2)])
    assert rep.ok() and rep.excused == 0


def test_a_holder_not_told_of_its_loss_is_an_overlap():
    rep = check([section("a", "X", 10, 0, 3), section("b", "X", 20, 1, 2)])
    assert len(rep.overlaps) == 1


def test_told_and_nothing_accepted_after_the_new_holders_visit_is_excused():
    # a's write was queued before it was told and landed after b's grant but before b
    # touched the resource (zxid 104 < 110): the resource ordered it before b.
    a = section("a", "X", 10, 0, 3, lost_at=0.5,
                writes=[("db.t/p=1", 1.2, "ok", 104), ("db.t/p=1", 1.4, "rejected", 111)])
    b = section("b", "S", 20, 1.0, 2, touched={"db.t/p=1": 110})
    rep = check([a, b])
    assert rep.ok() and rep.excused == 1


def test_a_write_accepted_after_the_new_holders_visit_is_an_overlap():
    a = section("a", "X", 10, 0, 3, lost_at=0.5, writes=[("db.t/p=1", 1.5, "ok", 112)])
    b = section("b", "X", 20, 1.0, 2, touched={"db.t/p=1": 110})
    assert len(check([a, b]).overlaps) == 1


def test_told_after_the_new_holder_started_is_an_overlap():
    a = section("a", "X", 10, 0, 3, lost_at=1.5)
    b = section("b", "X", 20, 1.0, 2, touched={"db.t/p=1": 110})
    assert len(check([a, b]).overlaps) == 1


def test_without_a_visit_the_clock_decides():
    a = section("a", "X", 10, 0, 3, lost_at=0.5, writes=[("db.t/p=1", 1.5, "ok", 112)])
    b = section("b", "X", 20, 1.0, 2)
    assert len(check([a, b]).overlaps) == 1
