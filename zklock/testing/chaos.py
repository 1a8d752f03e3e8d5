"""The chaos suite's client and checker (used by tests/core/test_chaos.py and `make soak`).

A client process loops until its deadline: it takes a random all-or-none
lock set (S and X on overlapping tables and partitions of one database),
holds it for a random time while writing to a fenced resource per X
object, and records each critical section as one JSON line: objects and
modes, fencing token, start, end, holder, when it was told of a loss, and
which of its writes the resources rejected. The checker reads every
client's lines and says whether the guarantees held.

    python -m zklock.testing.chaos HOSTS ROOT OUT_FILE SECONDS SEED
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Optional

DB = "chaos"
TABLES = ("t0", "t1", "t2")
PARTS = ("p=0", "p=1", "p=2")


def random_request(rng: random.Random) -> list[tuple[str, str]]:
    out = []
    for _ in range(rng.randint(1, 3)):
        table = rng.choice(TABLES)
        obj = f"{DB}.{table}" if rng.random() < 0.3 else f"{DB}.{table}/{rng.choice(PARTS)}"
        out.append((obj, "X" if rng.random() < 0.5 else "S"))
    return out


def run_client(hosts: str, root: str, out_file: str, seconds: float, seed: int) -> None:
    from zklock import LockLost, LockManager, LockNotAcquired
    from zklock.locks.fencing import FencedResource, StaleToken

    rng = random.Random(seed)
    name = f"client-{seed}-{os.getpid()}"
    deadline = time.monotonic() + seconds
    mgr = None
    with open(out_file, "a", buffering=1) as out:
        def record(**fields: Any) -> None:
            out.write(json.dumps({"client": name, **fields}) + "\n")

        while time.monotonic() < deadline:
            try:
                if mgr is None:
                    mgr = LockManager(hosts=hosts, root=root, session_timeout=4, retries=400,
                                      retry_interval=0.05, connect_timeout=10, job=name)
                request = random_request(rng)
                asked = time.time()
                held = mgr.acquire(request, query_id=name)
            except LockNotAcquired as exc:
                record(kind="gave-up", at=time.time(), asked=asked, request=request,
                       error=str(exc)[:200])
                continue
            except Exception as exc:  # ZooKeeper faults: try again
                record(kind="error", at=time.time(), error=f"{type(exc).__name__}: {exc}"[:200])
                time.sleep(0.2)
                if mgr is not None and not mgr.client.connected:
                    pass
                continue
            lost_at: list[float] = []
            held.on_lost(lambda _s, box=lost_at: box.append(time.time()))
            start = time.time()
            token = held.fencing_token
            writes = []
            touched: dict[str, int] = {}  # object -> zxid of this section's first visit
            xs = [h.target.obj.name for h in held.held if h.target.mode.value == "X"]
            ss = [h.target.obj.name for h in held.held if h.target.mode.value == "S"]
            for obj in ss:  # readers raise the resource's token: stale writers get refused
                try:
                    touched[obj] = FencedResource(
                        mgr.client, f"{root}-resources/{obj}").observe(token)
                except Exception:
                    pass
            # mostly short holds, some long ones (so faults often meet a held lock)
            hold_for = rng.uniform(0.02, 0.3) if rng.random() < 0.8 else rng.uniform(1, 3)
            t_end = time.monotonic() + hold_for
            while True:
                if lost_at:
                    break  # told of the loss: a well-behaved holder stops writing
                for obj in xs:
                    try:
                        zxid = FencedResource(mgr.client, f"{root}-resources/{obj}").write(
                            token, name.encode())
                        writes.append((obj, time.time(), "ok", zxid))
                        touched.setdefault(obj, zxid)
                    except StaleToken as exc:
                        writes.append((obj, time.time(), "rejected", exc.zxid))
                    except Exception as exc:
                        writes.append((obj, time.time(), f"error {type(exc).__name__}"))
                if time.monotonic() >= t_end:
                    break
                time.sleep(min(0.1, max(0.0, t_end - time.monotonic())))
            end = time.time()
            try:
                held.check()
                valid = True
            except LockLost:
                valid = False
            record(kind="section", locks=[[h.target.obj.name, h.target.mode.value]
                                          for h in held.held],
                   token=token, start=start, end=end, lost_at=lost_at[0] if lost_at else None,
                   valid_at_end=valid, writes=writes, touched=touched, asked=asked)
            held.release()
    if mgr is not None:
        mgr.close()


# ---- the checker ---------------------------------------------------------------------
@dataclass
class Report:
    sections: int = 0
    overlaps: list = field(default_factory=list)
    excused: int = 0
    gave_up: list = field(default_factory=list)
    errors: int = 0
    unreported: list = field(default_factory=list)
    longest_detect_s: float = 0.0
    longest_delete_detect_s: float = 0.0

    def ok(self) -> bool:
        return not self.overlaps and not self.gave_up and not self.unreported


def incompatible(a: str, b: str) -> bool:
    return a == "X" or b == "X"


def check(lines: list[dict[str, Any]], faults: Optional[list[dict[str, Any]]] = None,
          session_timeout: float = 4.0) -> Report:
    """Every pair of incompatible sections on one object either did not overlap, or the
    earlier holder had been told of its loss before the later one started and the resource
    accepted none of its writes after the later holder's first visit.

    "After" is the resource's own order (zxids), not client clocks: a request the earlier
    holder issued while suspended waits in its client's queue through the reconnect and
    may land after the later holder's grant but before that holder has touched the
    resource; it is then correctly ordered before everything the later holder does there."""
    rep = Report()
    sections = [x for x in lines if x.get("kind") == "section"]
    rep.sections = len(sections)
    rep.errors = sum(1 for x in lines if x.get("kind") == "error")
    # a request that gave up while no fault happened is a livelock (faults excuse waits)
    fault_times = sorted(f["at"] for f in faults or [])
    rep.gave_up = [x for x in lines if x.get("kind") == "gave-up"
                   and not any(x["asked"] - 1 <= t <= x["at"] for t in fault_times)]
    by_object: dict[str, list[tuple[dict, str]]] = {}
    for s in sections:
        for obj, mode in s["locks"]:
            by_object.setdefault(obj, []).append((s, mode))
    for obj, items in by_object.items():
        items.sort(key=lambda x: x[0]["start"])
        for i, (a, ma) in enumerate(items):
            for b, mb in items[i + 1:]:
                if b["start"] >= a["end"]:
                    break
                if a is b or a["client"] == b["client"] or not incompatible(ma, mb):
                    continue
                first, second = (a, b) if a["token"] < b["token"] else (b, a)
                told = first["lost_at"] is not None and (
                    first["lost_at"] <= second["start"] or deleted_under(first, faults))
                visit = (second.get("touched") or {}).get(obj)
                late = [w for w in first["writes"] if w[0] == obj and w[2] == "ok"
                        and (w[3] > visit if visit is not None else w[1] > second["start"])]
                fenced = not late
                if told and fenced:
                    rep.excused += 1
                else:
                    rep.overlaps.append({"object": obj, "first": first, "second": second})
    # a holder is told of a loss within the session timeout of the fault that caused it
    # (a node deleted under a live session: within DELETE_DETECT_S)
    for f in faults or []:
        if f["kind"] not in ("drop-client", "blackhole-client", "delete-node"):
            continue
        bound = DELETE_DETECT_S if f["kind"] == "delete-node" else session_timeout
        for s in sections:
            if s["client"] != f.get("client") or not (s["start"] <= f["at"] <= s["end"]):
                continue
            if s["lost_at"] is None:
                if s["end"] - f["at"] > bound:
                    rep.unreported.append({"fault": f, "section": s})
                continue
            took = s["lost_at"] - f["at"]
            if f["kind"] == "delete-node":
                rep.longest_delete_detect_s = max(rep.longest_delete_detect_s, took)
            else:
                rep.longest_detect_s = max(rep.longest_detect_s, took)
            if took > bound:
                rep.unreported.append({"fault": f, "section": s})
    return rep


#: How soon a holder must learn that another client deleted its lock node (a watch on it).
#: Measured under 0.2 s (docs/reliability.md); 3 s holds on a loaded 2-core machine
#: running eight clients and three servers.
DELETE_DETECT_S = 3.0


def deleted_under(section: dict[str, Any], faults: Optional[list[dict[str, Any]]]) -> bool:
    """Was ``section`` lost because a client deleted its node, and told within
    DELETE_DETECT_S? ZooKeeper tells a watcher after the delete, so another client may be
    granted in between: such an overlap is excused when the resource fenced it."""
    return any(f["kind"] == "delete-node" and f.get("client") == section["client"]
               and section["start"] <= f["at"] <= section["end"]
               and section["lost_at"] - f["at"] <= DELETE_DETECT_S for f in faults or [])


def read_lines(paths: list[str]) -> list[dict[str, Any]]:
    out = []
    for p in paths:
        try:
            with open(p) as fh:
                for line in fh:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass  # a line cut by SIGKILL
        except OSError:
            pass
    return out


def main(argv: list[str]) -> int:
    hosts, root, out_file, seconds, seed = argv[1:6]
    run_client(hosts, root, out_file, float(seconds), int(seed))
    return 0


if __name__ == "__main__":
    threading.current_thread().name = "chaos-client"
    sys.exit(main(sys.argv))
