"""protocol.properties is the one definition of what Python and the JVM module agree on:
each side's names are generated from it (zklock/spark/protocol.py's namespaces, the jar's
generated zklock.Protocol), and every name either side uses is a key of the file."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from zklock.spark import protocol

PROJECT = Path(__file__).resolve().parents[2]
JAVA = PROJECT / "zklock" / "spark" / "java"
NAMESPACES = {protocol.class_name(section): section for section in protocol.SECTIONS}


def python_sources() -> list[Path]:
    return [p for d in ("zklock", "cli", "scheduler", "tests", "bench", "scripts")
            for p in (PROJECT / d).rglob("*.py")]


def python_uses(path: Path) -> set[tuple[str, str]]:
    """(namespace, name) for each ``Field.VERSION`` or ``protocol.Field.VERSION`` in
    ``path`` whose namespace it imports from zklock.spark.protocol."""
    tree = ast.parse(path.read_text())
    imported = {alias.asname or alias.name for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("protocol")
                and node.level + (node.module or "").count("spark") >= 1
                for alias in node.names if alias.name in NAMESPACES}
    uses = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not node.attr.isupper():
            continue
        base = node.value
        if isinstance(base, ast.Name) and base.id in imported:
            uses.add((base.id, node.attr))
        elif (isinstance(base, ast.Attribute) and base.attr in NAMESPACES
              and isinstance(base.value, ast.Name) and base.value.id == "protocol"):
            uses.add((base.attr, node.attr))
    return uses


def test_every_name_imported_from_the_module_is_there():
    """What other modules import from zklock.spark.protocol, it has (an import of a name it
    no longer has fails only where that import runs: a CLI command, a server's start)."""
    missing = []
    for path in python_sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (
                    node.module == "zklock.spark.protocol"
                    or (node.level == 1 and node.module == "protocol"
                        and path.parent.name == "spark" and path.parent.parent.name == "zklock")):
                missing += [f"{path.relative_to(PROJECT)}: {a.name}" for a in node.names
                            if not hasattr(protocol, a.name)]
    assert not missing, missing


def test_a_namespace_pickles_by_its_section():
    """A UDF that names Field.NODES carries it to Spark's Python worker by pickle."""
    import pickle

    from pyspark import cloudpickle

    def fence_nodes() -> str:
        return protocol.Property.FENCE_NODES

    assert pickle.loads(cloudpickle.dumps(fence_nodes))() == protocol.Property.FENCE_NODES
    again = pickle.loads(pickle.dumps(protocol.Field))
    assert again.names() == protocol.Field.names() and again.VERSION == "version"


def test_every_section_has_a_namespace_on_both_sides():
    source = protocol.java_source()
    for name, section in NAMESPACES.items():
        assert isinstance(getattr(protocol, name, None), protocol.Section), name
        assert f"public static final class {name} {{" in source, name
        for key in protocol.SECTIONS[section]:
            assert f" {key.upper()} = " in source, f"{section}.{key}"


def test_every_name_python_uses_is_a_key_of_the_file():
    missing = [f"{path.relative_to(PROJECT)}: {ns}.{name}"
               for path in python_sources() for ns, name in python_uses(path)
               if name.lower() not in protocol.SECTIONS[NAMESPACES[ns]]]
    assert not missing, missing
    # (the scan finds what it is meant to find)
    assert ("Field", "VERSION") in python_uses(PROJECT / "zklock/spark/answer.py")


def test_every_name_java_uses_is_a_key_of_the_file():
    used = set()
    for path in JAVA.rglob("*.java"):
        text = path.read_text()
        used |= set(re.findall(r"\bProtocol\.([A-Z]\w*)\.([A-Z][A-Z0-9_]*)\b", text))
        for ns in set(re.findall(r"^import zklock\.Protocol\.([A-Z]\w*);", text, re.M)):
            used |= {(ns, n) for n in re.findall(rf"(?<![\w.]){ns}\.([A-Z][A-Z0-9_]*)\b", text)}
    sections = {(ns, n) for ns, n in used if ns in NAMESPACES}
    assert len(sections) > 50
    missing = [f"{ns}.{n}" for ns, n in sections
               if n.lower() not in protocol.SECTIONS[NAMESPACES[ns]]]
    assert not missing, missing
    unknown = {ns for ns, _ in used} - set(NAMESPACES) - {"Choice"}
    assert not unknown, unknown


def test_no_mode_letter_or_choice_word_is_written_in_java():
    """Lock modes and the settings' choices are the generated constants
    (Protocol.Mode.EXCLUSIVE, Protocol.Choice.ENGINE_MODE_REFUSE), never literals."""
    choices = {o for s in protocol.SETTINGS if hasattr(s.parse, "options") for o in s.parse.options}
    found = []
    for path in JAVA.rglob("*.java"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("//")[0]
            if code.lstrip().startswith(("*", "/*")):
                continue
            words = set(re.findall(r'"([^"\\]*)"\.equals\(|equals\("([^"\\]*)"\)', code))
            literals = {w for pair in words for w in pair if w}
            if '"X"' in code or '"S"' in code or literals & choices:
                found.append(f"{path.relative_to(JAVA)}:{number}: {line.strip()}")
    assert not found, found


def test_values_are_typed_alike_in_both_languages():
    assert protocol.Version.ENGINE == 1 and isinstance(protocol.Version.ENGINE, int)
    assert "public static final int ENGINE = 1;" in protocol.java_source()
    assert protocol.Mode.EXCLUSIVE == "X"
    try:
        getattr(protocol.Field, "NO_SUCH_FIELD")  # noqa: B009 (the scan above would see it)
    except AttributeError as exc:
        assert "field.no_such_field" in str(exc)
    else:
        raise AssertionError("a name the file lacks resolved")
