"""What zklock's Python and its JVM module agree on, read from the one file that defines it.

``protocol.properties`` (beside this module) is written once; the build copies it into the
jar, where Protocol.java reads it. Versions of the documents that cross between the two,
the local properties and tags a locked statement's jobs carry, and the conditions of the
engine's refusals.
"""

from __future__ import annotations

from pathlib import Path

from ..config import SETTINGS, spark_key

#: The file, as the jar's build copies it.
FILE = Path(__file__).with_name("protocol.properties")
#: Where the jar holds it.
JAR_ENTRY = "zklock/protocol.properties"


def _load() -> dict[str, str]:
    values = {}
    for line in FILE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            values[key.strip()] = value.strip()
    return values


_VALUES = _load()


def jar_text() -> str:
    """The file as the jar holds it: with the Spark conf key of each of zklock's settings
    appended (``setting.<name>=<key>``), from the one settings table, for the JVM to read."""
    rows = "".join(f"setting.{s.name}={s.spark}\n" for s in SETTINGS if s.spark)
    return FILE.read_text() + "\n# appended by the build from zklock/config.py\n" + rows

ENGINE_VERSION = int(_VALUES["engine.version"])
ANSWER_VERSION = int(_VALUES["answer.version"])
CONNECT_PROTOCOL = int(_VALUES["connect.protocol"])
FENCE_ZOOKEEPER = _VALUES["property.fence_zookeeper"]
FENCE_NODES = _VALUES["property.fence_nodes"]
QUERY_ID = _VALUES["property.query_id"]
FENCE_TAG = _VALUES["tag.fence"]
FENCE_REFUSED = _VALUES["fence.refused"]
REFUSED = _VALUES["condition.refused"]
DENIED = _VALUES["condition.denied"]
LOST = _VALUES["condition.lost"]
UNAVAILABLE = _VALUES["condition.unavailable"]
WRITE_FAILED = _VALUES["condition.write_failed"]
UNKNOWN_STATEMENTS = spark_key("unknown_statements")
ISOLATE_COMMITS = spark_key("isolate_commits")
LOCK_CLIENT_STATUS_FILE = _VALUES["conf.lock_client_status_file"]
COMMIT_PROTOCOL = _VALUES["conf.commit_protocol"]
COMMIT_PROTOCOL_CLASS = _VALUES["class.commit_protocol"]
