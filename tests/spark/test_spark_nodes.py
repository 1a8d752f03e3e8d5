"""Every logical plan class of the installed Spark is classified, so an upgrade cannot open a hole.

The test lists the classes in the Spark jars PySpark ships, loads each through the JVM and
keeps the concrete ``LogicalPlan`` subclasses. Each must have a kind in
zklock/spark/java/planner/NodeKinds.java; a Catalyst ``Command`` must not be classified as a
query. When a new
Spark brings a command or a write node, this test fails and names it, before any pipeline
meets it (at run time such a node is refused: see ``unknown_statements``).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from conftest import java_static

PACKAGE = "org/apache/spark/sql/"


def plan_classes(spark) -> dict[str, bool]:
    """simple name -> is a Catalyst Command, for every concrete LogicalPlan in Spark's jars."""
    import pyspark

    jvm = spark._jvm
    logical = jvm.org.apache.spark.sql.catalyst.plans.logical
    plan, command = logical.LogicalPlan._java_lang_class, logical.Command._java_lang_class
    modifier = jvm.java.lang.reflect.Modifier
    loader = spark._jsparkSession.getClass().getClassLoader()
    out: dict[str, bool] = {}
    for jar in sorted((Path(pyspark.__file__).parent / "jars").glob("spark-*.jar")):
        with zipfile.ZipFile(jar) as z:
            for entry in z.namelist():
                if not entry.startswith(PACKAGE) or not entry.endswith(".class"):
                    continue
                simple = entry.rsplit("/", 1)[1][:-len(".class")]
                if "$" in simple.rstrip("$"):  # inner and anonymous classes
                    continue
                try:
                    cls = jvm.java.lang.Class.forName(entry[:-6].replace("/", "."), False, loader)
                except Exception:  # needs a class path PySpark does not ship (YARN, Kafka)
                    continue
                if not plan.isAssignableFrom(cls) or cls.isInterface() \
                        or modifier.isAbstract(cls.getModifiers()):
                    continue
                name = simple.rstrip("$")
                out[name] = out.get(name, False) or bool(command.isAssignableFrom(cls))
    return out


@pytest.fixture(scope="module")
def classes(spark) -> dict[str, bool]:
    found = plan_classes(spark)
    assert len(found) > 250, "the enumeration found too few plan classes: is it broken?"
    return found


@pytest.fixture(scope="module")
def table(spark) -> dict[str, str]:
    """NodeKinds.java's table, as the planner in this JVM reads it."""
    found = java_static(spark, "planner.NodeKinds", "table")
    return {str(k): str(found.get(k)) for k in found.keySet()}


def test_every_plan_class_is_classified(classes, table):
    missing = sorted(n for n in classes if n not in table)
    assert not missing, ("plan node classes zklock has never classified (add each to"
                         " zklock/spark/java/planner/NodeKinds.java with its lock rule):"
                         f" {missing}")


def test_no_command_is_classified_as_a_query(classes, table):
    wrong = sorted(n for n, is_cmd in classes.items() if is_cmd and table.get(n) == "QUERY")
    assert not wrong


def test_unknown_names_are_treated_as_writes(spark):
    def unknown_write(name: str, is_command: bool) -> bool:
        return bool(java_static(spark, "planner.NodeKinds", "isUnknownWrite", name, is_command))

    assert unknown_write("FancyNewCommand", True)
    assert unknown_write("InsertIntoSomethingNew", False)
    assert not unknown_write("Project", False)
