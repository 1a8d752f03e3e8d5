"""PollingHandler: kazoo's wait on its sockets, answered by poll(2) (zklock/handler.py).

Real sockets and a real ZooKeeper: where kazoo's connection asks, the handler must answer
as kazoo's own does (those tests run on both), or the connection would hang or drop."""

from __future__ import annotations

import socket

import pytest
from kazoo.handlers.threading import SequentialThreadingHandler

from zklock.config import Settings
from zklock.handler import PollingHandler
from zklock.manager import connect

HANDLERS = [PollingHandler(), SequentialThreadingHandler()]


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


@pytest.mark.parametrize("handler", HANDLERS, ids=lambda h: type(h).__name__)
def test_a_socket_with_data_is_readable_and_only_then(handler, pair):
    a, b = pair
    assert handler.select([a], [], [], 0) == ([], [], [])
    b.send(b"x")
    assert handler.select([a, b], [], [], 1) == ([a], [], [])


def test_read_and_write_interest_on_one_socket_are_answered_as_select_answers(pair):
    a, b = pair
    b.send(b"x")
    readable, writable, _ = PollingHandler().select([a], [a], [], 1)
    assert (readable, writable) == ([a], [a])


@pytest.mark.parametrize("handler", HANDLERS, ids=lambda h: type(h).__name__)
def test_a_peer_gone_is_readable_so_the_read_meets_the_end(handler, pair):
    a, b = pair
    b.close()
    assert handler.select([a], [], [], 1)[0] == [a]
    assert a.recv(1) == b""


def test_a_closed_descriptor_raises_as_select_would(pair):
    a, _ = pair
    fd = a.fileno()
    a.close()
    with pytest.raises(OSError):
        PollingHandler().select([fd], [], [], 0)


def test_a_negative_timeout_is_refused_as_kazoo_refuses_it(pair):
    with pytest.raises(ValueError):
        PollingHandler().select([pair[0]], [], [], -1)


def test_every_client_zklock_connects_talks_through_it(zk_hosts):
    client = connect(Settings.resolve(dict(hosts=zk_hosts)))
    try:
        assert isinstance(client.handler, PollingHandler)
        path = client.create("/handler-test/n", b"v", makepath=True, ephemeral=True)
        assert client.get(path)[0] == b"v"
        client.delete(path)
    finally:
        client.stop()
        client.close()
