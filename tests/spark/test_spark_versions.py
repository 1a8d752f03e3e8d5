"""Which Spark lines zklock supports, and which adapters each gets (zklock/spark/jvm.py).

The module's sources are one tree; what differs per Spark line is SparkAdapters.java under
zklock/spark/adapters/spark-<line>/. `make test-compat` runs the Spark-facing tests on the
other supported lines; here, the choice itself.
"""

from __future__ import annotations

import pytest

from zklock.spark.jvm import JvmModuleError, adapter_line, adapter_lines, sources


@pytest.mark.parametrize("version,line", [("4.0.0", (4, 0)), ("4.0.5", (4, 0)),
                                          ("4.1.0", (4, 1)), ("4.2.1", (4, 1)),
                                          ("4.3.0", (4, 1)), ("4.3.1.dev0", (4, 1))])
def test_each_supported_version_gets_the_newest_line_not_newer_than_it(version, line):
    assert adapter_line(version) == line


@pytest.mark.parametrize("version", ["3.5.7", "3.5.0", "4.4.0", "5.0.0"])
def test_an_unsupported_version_is_one_clear_line(version):
    with pytest.raises(JvmModuleError, match=f"zklock supports Spark 4.0 to 4.3; this PySpark"
                                             f" is {version}$"):
        adapter_line(version)


def test_every_line_has_the_same_adapter_class_and_one_copy_of_the_rest():
    for major, minor in adapter_lines():
        names = [p.name for p in sources(f"{major}.{minor}.0")]
        assert names.count("SparkAdapters.java") == 1
        assert len(names) == len(set(names))
