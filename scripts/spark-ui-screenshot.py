#!/usr/bin/env python3
"""Take docs/img/spark-ui-lock-figures.png: Spark's UI showing a locked statement's node
with its lock figures (LockFigures.java), from a real run, with headless Chromium.

An embedded ZooKeeper; a Spark application with zklock, its UI on a free port; another
holder keeps X on a table for two seconds while the application's INSERT waits for it; then
Debian's Chromium (``apt-get install chromium``) renders the SQL tab's page of that
execution. Run: ``.venv/bin/python scripts/spark-ui-screenshot.py [output.png]``.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from pyspark.sql import SparkSession

import zklock.spark
from zklock import LockManager
from zklock.locks.mode import Mode
from zklock.locks.objects import LockObject
from zklock.servers.ports import free_port
from zklock.servers.zookeeper import ZkServer
from zklock.spark import enforce

OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else (
    Path(__file__).resolve().parents[1] / "docs" / "img" / "spark-ui-lock-figures.png")


class Chromium:
    """Debian's Chromium, headless, driven over its DevTools pipe (fd 3 in, fd 4 out,
    messages ending in NUL): the standard library is enough, no browser driver."""

    def __init__(self) -> None:
        to_child, self._out = os.pipe()
        self._in, from_child = os.pipe()

        def fds() -> None:
            os.dup2(to_child, 3)
            os.dup2(from_child, 4)
        self.proc = subprocess.Popen(
            ["/usr/lib/chromium/chromium", "--headless", "--no-sandbox", "--disable-gpu",
             "--hide-scrollbars",
             "--remote-debugging-pipe", "--window-size=1400,1150", "about:blank"],
            pass_fds=(3, 4), preexec_fn=fds,  # (kept open after fds() put the pipes there)
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child)
        os.close(from_child)
        self._ids = 0
        self._buffer = b""
        self.session = None

    def call(self, method: str, **params: object) -> dict:
        self._ids += 1
        message = {"id": self._ids, "method": method, "params": params}
        if self.session is not None and not method.startswith("Target."):
            message["sessionId"] = self.session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self._buffer:
                self._buffer += os.read(self._in, 1 << 20)
            raw, self._buffer = self._buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._ids:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def evaluate(self, expression: str) -> object:
        return self.call("Runtime.evaluate", expression=expression,
                         returnByValue=True)["result"].get("value")

    def until(self, expression: str, what: str) -> None:
        """Poll ``expression`` until it holds (the page works by script); raise if it never
        does within 20 s."""
        for _ in range(200):
            if self.evaluate(expression):
                return
            time.sleep(0.1)
        raise RuntimeError(f"the page never showed {what}")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def screenshot(url: str) -> bytes:
    """The SQL tab's page of one execution, its plan drawn with each node's metrics (Spark's
    "detailed mode", a choice the page keeps in localStorage)."""
    browser = Chromium()
    try:
        page = next(t["targetId"] for t in browser.call("Target.getTargets")["targetInfos"]
                    if t["type"] == "page")
        browser.session = browser.call("Target.attachToTarget", targetId=page,
                                       flatten=True)["sessionId"]
        browser.call("Page.navigate", url=url)
        drawn = "document.querySelectorAll('#plan-viz-graph svg g.node').length > 0"
        browser.until(drawn, "its plan")
        browser.evaluate("localStorage.setItem('detailed-labels-checked', 'true')")
        browser.call("Page.reload")
        shown = "document.body.innerText.includes('time waiting for locks')"
        browser.until(shown, "the plan in detailed mode")
        # zklock's node clicked: the details panel names it, and its title's tooltip (what
        # hovering shows) is the node's text, with whom the statement waited for
        browser.evaluate("[...document.querySelectorAll('#plan-viz-graph svg g.node')]"
                         ".find(g => g.textContent.includes('LockedCommand'))"
                         ".dispatchEvent(new MouseEvent('click', {bubbles: true}))")
        title = "document.getElementById('plan-viz-details-title')"
        browser.until(f"{title}.textContent === 'LockedCommand'", "the node's details")
        browser.evaluate(f"bootstrap.Tooltip.getInstance({title}).show()")
        faded_in = ("(t => t !== null && getComputedStyle(t).opacity === '1')"
                    "(document.querySelector('.tooltip.show'))")
        browser.until(faded_in, "the node's text")
        shot = browser.call("Page.captureScreenshot", format="png")
        return base64.b64decode(shot["data"])
    finally:
        browser.close()


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="zklock-ui-"))
    server = ZkServer(work / "zk", port=free_port())
    hosts = server.start()
    ui = free_port()
    spark = zklock.spark.configure(SparkSession.builder.master("local[2]")
                                   .config("spark.ui.port", str(ui))
                                   .config("spark.sql.warehouse.dir", str(work / "wh"))
                                   .config("spark.sql.shuffle.partitions", "2")).getOrCreate()
    try:
        spark.sql("CREATE DATABASE sales")
        spark.sql("CREATE TABLE sales.orders (id INT, amount DOUBLE) USING parquet")
        spark.sql("INSERT INTO sales.orders VALUES (1, 9.5)")
        backfill = LockManager(hosts=hosts, root="/warehouse")
        held = backfill.acquire([(LockObject.parse("sales.orders"), Mode.EXCLUSIVE)],
                                query_id="zklock-backfill-2024-01")
        threading.Timer(2.0, held.release).start()  # the backfill's hold: two seconds
        with enforce(spark, LockManager(hosts=hosts, root="/warehouse", retries=200,
                                        retry_interval=0.1)):
            spark.sql("INSERT INTO sales.orders SELECT id + 1, amount FROM sales.orders")
        store = spark._jsparkSession.sharedState().statusStore()
        listed = store.executionsList()
        execution = max(listed.apply(i).executionId() for i in range(listed.size()))
        url = f"http://127.0.0.1:{ui}/SQL/execution/?id={execution}"
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_bytes(screenshot(url))
        print(f"{OUT} ({url})")
    finally:
        spark.stop()
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
