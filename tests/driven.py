"""An application a test drives in a process of its own, line by line: its stdin and stdout
are the test's, its stderr a file (never a pipe no one reads while it runs: a failed Spark
job's stack traces would fill it and hang the application), and a watchdog kills it if it
hangs, so that every read of its output ends (EOF)."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def driven(args: list[str], cwd: Path, limit: float) -> Iterator[tuple[subprocess.Popen, Path]]:
    """The running application and its stderr's file; killed at ``limit`` seconds, or at
    the block's end if it still runs."""
    errors = cwd / "app.err"
    with errors.open("w") as err:
        app = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=err, text=True, cwd=cwd)
    hung = threading.Timer(limit, app.kill)
    hung.start()
    try:
        yield app, errors
    finally:
        hung.cancel()
        if app.poll() is None:
            app.kill()
            app.wait()
