"""PollingHandler: kazoo's threading handler, waiting on its sockets with one poll(2).

kazoo's connection thread waits for its socket before every read and every write
of a request, about five waits per request. kazoo's own handler answers each wait
through ``kazoo.handlers.utils.selector_select``, which builds an epoll selector,
registers the descriptors, waits and closes it: four system calls and about 10 us
of Python a wait. A scheduler leader claiming a burst of 100 triggers, or an
executor taking them, spends a large share of its CPU there (bench/scheduler.py,
docs/benchmarks.md), and every lock grant pays it too.

poll(2) needs no descriptor of its own: one system call, about 2 us, and no
limit on descriptor numbers (the reason kazoo left select(2)). The answer has
kazoo's form, the readable and writable objects passed in, in three lists, with
select(2)'s meaning where kazoo's differs (kazoo's connection never meets either
case): an object asked for both reading and writing is reported in each list it is
ready for (kazoo's reports it as readable only), and a descriptor poll calls
invalid raises OSError as select(2) would (kazoo's raises ValueError), which
kazoo's connection treats as a dropped connection.
"""

from __future__ import annotations

import errno
import select
from collections.abc import Sequence
from typing import Any, Optional

from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.handlers.utils import fileobj_to_fd

_READ = select.POLLIN
_WRITE = select.POLLOUT


class PollingHandler(SequentialThreadingHandler):
    """kazoo's SequentialThreadingHandler with :meth:`select` on poll(2)."""

    name = "polling_threading_handler"

    def select(self, rlist: Sequence[Any], wlist: Sequence[Any], xlist: Sequence[Any],
               timeout: Optional[float] = None) -> tuple[list, list, list]:
        if timeout is not None and timeout < 0:
            raise ValueError("timeout must be non-negative")
        poller = select.poll()
        wanted: dict[int, int] = {}
        readers: dict[int, list[Any]] = {}
        writers: dict[int, list[Any]] = {}
        for mask, fileobjs, by_fd in ((_READ, rlist, readers), (_WRITE, wlist, writers)):
            for obj in fileobjs:
                fd = fileobj_to_fd(obj)
                wanted[fd] = wanted.get(fd, 0) | mask
                by_fd.setdefault(fd, []).append(obj)
        for fd, mask in wanted.items():
            poller.register(fd, mask)
        readable: list[Any] = []
        writable: list[Any] = []
        for fd, events in poller.poll(None if timeout is None else timeout * 1000):
            if events & select.POLLNVAL:
                raise OSError(errno.EBADF, f"descriptor {fd} is not open")
            # a hang-up or an error is both readable and writable, as select(2) and
            # Python's PollSelector report it: the read or write that follows meets it
            if events & ~_WRITE:
                readable += readers.get(fd, ())
            if events & ~_READ:
                writable += writers.get(fd, ())
        return readable, writable, []


__all__ = ["PollingHandler"]
