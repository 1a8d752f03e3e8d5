"""make dist: zklock's wheel, carrying its JVM module built for every supported Spark line.

For each line (3.5; 4.0; 4.1 and newer) the module is compiled against the jars of one
Spark version of that line (``--spark``; by default the versions CI tests: 3.5.0, 4.0.0 and
the suite's own newest PySpark), for the oldest Java the line runs on
(zklock.spark.jvm.java_release), as ``zklock/spark/jars/zklock-spark-<line>.jar`` of a
staging copy of the source tree (never of the tree itself, whose module a running suite
may be loading); then ``pip wheel`` packs them with the Python (setup.cfg's
package_data). An installed wheel picks the jar of the installed Spark's line and needs no
JDK and no write (docs/deploy.md).

A version's jars come from PySpark's own package: the suite's virtualenv when it has that
version, a compatibility run's (.venv-compat/pyspark-<version>), else one installed here
once with ``pip install --no-deps --target .zklock/dist/pyspark-<version>``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from zklock.spark.jvm import (  # noqa: E402
    build_jar,
    has_connect_server,
    jar_info,
    jar_line,
    packaged_jar,
)

#: What the staging copy leaves out: virtualenvs, caches, build output, version control.
NOT_SHIPPED = shutil.ignore_patterns(".venv*", ".zklock", ".git", "dist", "build", "jars",
                                     "__pycache__", "*.egg-info", ".*_cache", ".hypothesis",
                                     "spark-warehouse", "metastore_db")


def newest_pyspark() -> str:
    import pyspark

    return str(pyspark.__version__)


def spark_jars(version: str) -> Path:
    """The jars of PySpark ``version``, installed once under .zklock/dist if no virtualenv
    of this checkout has them."""
    import pyspark

    if newest_pyspark() == version:
        return Path(pyspark.__file__).parent / "jars"
    for site in (ROOT / ".venv-compat" / f"pyspark-{version}").glob(
            "lib/python*/site-packages/pyspark/jars"):
        return site
    target = ROOT / ".zklock" / "dist" / f"pyspark-{version}"
    jars = target / "pyspark" / "jars"
    if not jars.is_dir():
        print(f"== make dist: fetching PySpark {version}'s jars into {target}", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                        "--target", str(target), f"pyspark=={version}"], check=True)
    return jars


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spark", nargs="+", default=["3.5.0", "4.0.0", newest_pyspark()],
                        help="one Spark version per line to build the module against")
    parser.add_argument("--out", default=str(ROOT / "dist"), help="where the wheel goes")
    args = parser.parse_args()
    lines = {jar_line(v): v for v in args.spark}
    if len(lines) != len(args.spark):
        parser.error("give one Spark version per line (3.5, 4.0, 4.1+)")
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="zklock-dist-") as tmp:
        staging = Path(tmp) / "zklock"
        shutil.copytree(ROOT, staging, ignore=NOT_SHIPPED)
        for line, version in sorted(lines.items()):
            jars = spark_jars(version)
            jar = staging / packaged_jar(version).relative_to(ROOT)
            build_jar(version, jars, jar, connect=has_connect_server(jars))
            info = jar_info(jar)
            print(f"== make dist: {jar.name} for Spark {line[0]}.{line[1]}, built against"
                  f" {version} for Java {info['java']} (build {info['build']})", flush=True)
        for old in out.glob("zklock-*.whl"):
            old.unlink()
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                        str(out), str(staging)], check=True)
    for wheel in out.glob("zklock-*.whl"):
        print(f"== make dist: {wheel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
