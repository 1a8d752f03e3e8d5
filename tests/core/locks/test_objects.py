"""Lock object names, escaping, validation, modes and normalisation (no server needed)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zklock import InvalidLockObject, LockObject, Mode, normalize
from zklock.errors import InvalidArguments
from zklock.locks.locknode import LockNodeName, blocks, seq_before
from zklock.locks.objects import escape_path_name, unescape_path_name


def test_forms_and_case():
    assert LockObject.parse("Sales").name == "sales"
    assert LockObject.parse("Sales.Orders").name == "sales.orders"
    p = LockObject.parse("sales.orders/DS=2024-01-01/hr=10")
    assert p.partition == (("ds", "2024-01-01"), ("hr", "10"))
    assert LockObject.parse("sales@orders@ds=2024-01-01/hr=10") == p
    assert LockObject.parse("orders/ds=1").name == "default.orders/ds=1"
    assert LockObject.of_table("orders").name == "default.orders"
    assert LockObject.parse("`sales`.`orders`").name == "sales.orders"
    assert LockObject.parse("db@t@k=a@b").partition == (("k", "a@b"),)
    assert p.display_name == "sales@orders@ds=2024-01-01/hr=10"


def test_parents_in_order():
    p = LockObject.parse("db.t/a=1/b=2/c=3")
    assert [x.name for x in p.parents()] == ["db", "db.t", "db.t/a=1", "db.t/a=1/b=2"]
    assert LockObject.parse("db").parents() == []


@pytest.mark.parametrize("value", ["a/b", "k=v", "50%", "with space", "üñí©ødé", "日本",
                                   "tab\there", "x\x7fy", "\u0085", "emoji 😀", "%u00004",
                                   "..", "."])
def test_values_round_trip(value):
    obj = LockObject.of_table("db.t", {"k": value})
    again = LockObject.parse(obj.name)
    assert again.partition == (("k", value),)
    comp = obj.znode_parts()[-1]
    assert "/" not in comp and comp not in (".", "..")


def test_hive_escaping_compatible():
    assert escape_path_name("a/b=c%d:e") == "a%2Fb%3Dc%25d%3Ae"
    assert unescape_path_name("50%") == "50%"
    assert unescape_path_name("a%2Fb") == "a/b"


@pytest.mark.parametrize("bad, part", [
    ("", "empty"), ("db.", "empty"), (".t", "empty"), ("db..t", "too many"),
    ("db.t/", "empty partition"), ("db.t//a=1", "empty partition component"),
    ("db.t/a", "not k=v"), ("db.t/a=", "empty value"), ("..", "too many"),
    ("db.t/=1", "empty partition key"), ("d\x00b", "control"), ("d\nb.t", "control"),
    ("a" * 200, "max 128"), ("db.read-x", "read-"), ("db.t/k=" + "v" * 800, "max 767"),
    ("db@t@", "empty partition"), ("a@b@c@d", "not k=v"), ("db b", "not allowed"),
    ("db@@k=v", "empty table"),
])
def test_invalid_names_say_what_is_wrong(bad, part):
    with pytest.raises(InvalidLockObject) as err:
        LockObject.parse(bad)
    assert part in str(err.value)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_any_text_parses_or_raises_invalid(text):
    try:
        obj = LockObject.parse(text)
    except InvalidLockObject:
        return
    for comp in obj.znode_parts():
        assert comp and comp not in (".", "..") and "/" not in comp
        assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or 0xD800 <= ord(c) <= 0xF8FF
                       or ord(c) >= 0xFFF0 for c in comp)
    assert LockObject.parse(obj.name) == obj


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True),
                          st.text(min_size=1, max_size=20)), min_size=1, max_size=4))
def test_any_partition_value_round_trips(spec):
    keys = {k for k, _ in spec}
    if len(keys) != len(spec):
        return
    obj = LockObject("db", "t", tuple(spec))
    assert LockObject.parse(obj.name) == obj
    assert LockObject.from_znode_parts(obj.znode_parts()) == obj


def test_modes():
    assert Mode.parse("s") is Mode.SHARED and Mode.parse("EXCLUSIVE") is Mode.EXCLUSIVE
    with pytest.raises(ValueError):
        Mode.parse("Q")
    assert Mode.SHARED.compatible_with(Mode.SHARED)
    assert not Mode.SHARED.compatible_with(Mode.EXCLUSIVE)
    assert not Mode.EXCLUSIVE.compatible_with(Mode.SHARED)
    assert not Mode.EXCLUSIVE.compatible_with(Mode.EXCLUSIVE)


def test_normalize_adds_parents_merges_sorts():
    got = normalize([("db.t/ds=1", "X"), ("db.t", "S"), ("db.t/ds=1", "S"),
                     ("db.a", "X"), ("DB.T/ds=1", "s")])
    assert [(t.name, t.mode.value) for t in got] == [
        ("db", "S"), ("db.a", "X"), ("db.t", "S"), ("db.t/ds=1", "X")]
    got = normalize([("db.t/ds=1", "S"), ("db.t", "X")])
    assert [(t.name, t.mode.value) for t in got] == [
        ("db", "S"), ("db.t", "X"), ("db.t/ds=1", "S")]


def test_normalize_rejects_bad_input():
    with pytest.raises(InvalidArguments):
        normalize("db.t")
    with pytest.raises(InvalidArguments):
        normalize([("db.t", "Q")])
    with pytest.raises(InvalidArguments):
        normalize([("db.t",)])
    with pytest.raises(InvalidLockObject):
        normalize([("db/../x", "S")])


def test_sequence_wraparound_order():
    top = 2**31 - 1
    assert seq_before(5, 6) and not seq_before(6, 5) and not seq_before(5, 5)
    # ZooKeeper's counter goes 2147483647 -> -2147483648 -> ...
    assert seq_before(top, -(2**31))
    assert seq_before(top - 10, -(2**31) + 10)
    assert not seq_before(-(2**31) + 10, top - 10)
    name = LockNodeName.parse("write-i" + "a" * 24 + "--2147483648")
    assert name is not None and name.seq == -(2**31)
    assert blocks(Mode.SHARED, -(2**31) + 3, name)


def test_lock_node_names():
    n = LockNodeName.parse("read-e" + "0" * 24 + "-0000000042")
    assert n and n.mode is Mode.SHARED and n.explicit and n.seq == 42
    assert LockNodeName.parse("ds=2024") is None
    assert LockNodeName.parse("read-foo") is None
