"""Where this machine's Java tools are: the JVM that runs ZooKeeper, Hive's metastore and
Spark, and the JDK's compiler that builds zklock's JVM module from a source install."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def jdk_tool(name: str) -> str | None:
    """``$JAVA_HOME/bin/<name>`` (java, javac) when it exists, else ``name`` on the PATH;
    None when neither is there."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / name).exists():
        return str(Path(home) / "bin" / name)
    return shutil.which(name)
