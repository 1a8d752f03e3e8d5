"""A Spark application on a shared Hive Metastore, driven by a test over its stdin.

    python hive_app.py NAME CONF_JSON

CONF_JSON holds ``spark`` (the Spark conf that joins the metastore), ``hosts``, ``root``,
``event_log`` and ``latch`` (a directory for the SQL function ``zk_latch``, see
conftest.Latch). The application builds its SparkSession with Hive support and zklock's
engine extension, wraps it in a LockingSession (job NAME), prints ``{"ready": true}``, then
runs one JSON request per stdin line, ``{"sql": ..., "retries": n, "plain": false}``
(retries: how many times a denied request is retried, 0 by default; plain: run it through
the unwrapped session, whose statements the engine locks), and prints one JSON
answer per request: ``{"rows": [[...], ...]}`` or ``{"error": <class>, "message": ...}``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parents[1])]


def main() -> int:
    name, conf = sys.argv[1], json.loads(sys.argv[2])
    from conftest import Latch
    from pyspark.sql import SparkSession

    from zklock.spark import LockingSession, configure

    builder = (SparkSession.builder.master("local[1]").appName(f"hive-app-{name}")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "1")
               .config("spark.driver.memory", "512m"))
    for key, value in conf["spark"].items():
        builder = builder.config(key, value)
    spark = configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    Latch(spark, Path(conf["latch"]))
    session = LockingSession(spark, hosts=conf["hosts"], root=conf["root"], job=name,
                             user=name, event_log=conf["event_log"], retry_interval=0.05)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            session.set(retries=request.get("retries", 0))
            runner = spark if request.get("plain") else session
            rows = [list(r) for r in runner.sql(request["sql"]).collect()]
            print(json.dumps({"rows": rows}, default=str), flush=True)
        except Exception as exc:  # the test judges the answer; the application goes on
            print(json.dumps({"error": type(exc).__name__,
                              "message": str(exc).splitlines()[0] if str(exc) else ""}),
                  flush=True)
    session.close()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
