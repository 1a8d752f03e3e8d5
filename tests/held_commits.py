"""A test's hold on a write job: zklock's commit protocol, held at the job's setup or its
commit while a file exists (tests/spark/java/HeldCommitProtocol.java), so that a test can
lose the job's locks exactly there. The class is compiled here, against the installed
PySpark's jars and zklock's jar, and put on a test application's class path (``jar()``);
a session writes through it once ``CONF`` is set on it. zklock's own jar has no test hook.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import threading
import uuid
import zipfile
from pathlib import Path

from polling import wait_for

from zklock.servers.java import jdk_tool
from zklock.spark.jvm import cache_dir, java_release, module_jar, spark_version
from zklock.spark.protocol import Conf

SOURCE = Path(__file__).parent / "spark" / "java" / "HeldCommitProtocol.java"
CLASS = "zklock.tests.HeldCommitProtocol"
#: Set on a session, its file writes commit through the held protocol.
CONF = {Conf.COMMIT_PROTOCOL: CLASS}
#: The system properties naming each point's file (the class's AT_SETUP and AT_COMMIT).
AT_SETUP = "zklock.tests.holdSetup"
AT_COMMIT = "zklock.tests.holdCommit"


def jar() -> Path:
    """The held protocol's jar for the installed PySpark and this zklock jar, compiled once
    (written whole: several test workers may ask at once)."""
    import pyspark

    spark_jars = Path(pyspark.__file__).parent / "jars"
    zklock_jar = module_jar()
    # Spark's commitJob takes Scala's Seq: scala.collection.Seq on 2.12 (Spark 3.5),
    # scala.collection.immutable.Seq on 2.13
    seq = ("scala.collection.Seq" if any(spark_jars.glob("scala-library-2.12*.jar"))
           else "scala.collection.immutable.Seq")
    source = SOURCE.read_text().replace("SEQ<", f"{seq}<")
    key = hashlib.sha256(f"{source}{spark_version()}{zklock_jar}".encode()).hexdigest()[:16]
    target = cache_dir() / f"held-commits-{key}.jar"
    if target.exists():
        return target
    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        src = Path(work) / "zklock" / "tests" / SOURCE.name
        src.parent.mkdir(parents=True)
        src.write_text(source)
        classes = Path(work) / "classes"
        subprocess.run([jdk_tool("javac") or "javac", "-nowarn",
                        "--release", java_release(spark_version()),
                        "-cp", f"{spark_jars}/*:{zklock_jar}", "-d", str(classes), str(src)],
                       check=True, capture_output=True, text=True, timeout=300)
        tmp = Path(work) / "held.jar"
        with zipfile.ZipFile(tmp, "w") as z:
            for f in sorted(classes.rglob("*.class")):
                z.write(f, f.relative_to(classes).as_posix())
        os.replace(tmp, target)
    return target


class HeldWrite:
    """Runs ``fn`` on a thread whose write job waits at ``point`` (AT_SETUP or AT_COMMIT)
    until :meth:`release`; ``fn`` writes through a session with ``CONF`` set."""

    def __init__(self, spark, directory: Path, fn, point: str = AT_COMMIT) -> None:
        self.jvm_system = spark._jvm.java.lang.System
        self.point = point
        self.file = directory / f"hold-{uuid.uuid4().hex[:8]}"
        self.fn = fn
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        try:
            self.fn()
        except BaseException as exc:  # handed to the test thread
            self.error = exc

    def reached(self) -> bool:
        return Path(f"{self.file}.held").exists()

    def __enter__(self) -> HeldWrite:
        self.file.write_text("held")
        self.jvm_system.setProperty(self.point, str(self.file))
        self.thread.start()
        assert wait_for(lambda: self.reached() or not self.thread.is_alive(), timeout=120), \
            f"the write never reached {self.point}"
        assert self.reached(), f"the write ended before {self.point}: {self.error!r}"
        return self

    def release(self) -> BaseException | None:
        """Let the job go on; the write's exception (None if it committed)."""
        self.file.unlink(missing_ok=True)
        self.thread.join(timeout=120)
        assert not self.thread.is_alive()
        return self.error

    def __exit__(self, *exc: object) -> None:
        self.jvm_system.clearProperty(self.point)
        self.release()
