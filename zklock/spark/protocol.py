"""What zklock's Python and its JVM module agree on, generated from the one file that
defines it.

``protocol.properties`` (beside this module) is written once, as sections of keys
(``field.version=version``). Python reads it here: each section is a namespace whose
attributes are its keys in upper case (``Field.VERSION``). The JVM module's ``zklock.Protocol``
is generated from the same file when the jar is built (:func:`java_source`), with the same
names (``Protocol.Field.VERSION``), together with the settings the JVM reads, from zklock's
one settings table (config.SETTINGS). No name is written twice: a key the file lacks fails
the JVM's compile and, in Python, the attribute's lookup (tests/spark/test_protocol.py finds
each use).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..config import CARRIED_KEYS, FALSE_WORDS, SETTINGS, TRUE_WORDS, Choice, parse_bool

#: The file.
FILE = Path(__file__).with_name("protocol.properties")


def _load() -> dict[str, dict[str, str]]:
    """The file's keys by section, in order (``field.version=version``: section ``field``,
    key ``version``)."""
    sections: dict[str, dict[str, str]] = {}
    for line in FILE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            section, _, name = key.strip().partition(".")
            sections.setdefault(section, {})[name] = value.strip()
    return sections


#: The file's keys by section.
SECTIONS = _load()


def value(text: str) -> int | str:
    """A value as both languages type it: digits are an integer, the rest text."""
    return int(text) if text.isdigit() else text


def class_name(section: str) -> str:
    """The name of a section's namespace, in both languages: ``jvm_class`` is ``JvmClass``."""
    return "".join(part.capitalize() for part in section.split("_"))


class Section:
    """One section of protocol.properties: its keys as upper-case attributes
    (``Field.VERSION`` is ``field.version``'s value), as the JVM's generated Protocol names
    them. A name the file lacks raises AttributeError naming the key."""

    def __init__(self, section: str) -> None:
        self._section = section
        for name, text in SECTIONS[section].items():
            setattr(self, name.upper(), value(text))

    def __getattr__(self, name: str) -> Any:  # only for names the file lacks
        if name.startswith("_"):  # (pickle's and copy's probes, before any state)
            raise AttributeError(name)
        raise AttributeError(f"zklock/spark/protocol.properties has no"
                             f" {self._section}.{name.lower()}")

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled by its section's name (a UDF's closure that names ``Field.NODES`` reads
        the file again in Spark's Python worker)."""
        return (Section, (self._section,))

    def names(self) -> list[str]:
        """Its attributes' names, in the file's order."""
        return [name.upper() for name in SECTIONS[self._section]]


Version = Section("version")
Property = Section("property")
Tag = Section("tag")
Fence = Section("fence")
Condition = Section("condition")
Conf = Section("conf")
JvmClass = Section("jvm_class")
Call = Section("call")
Outcome = Section("outcome")
Statement = Section("statement")
Event = Section("event")
Kind = Section("kind")
Refusal = Section("refusal")
Connect = Section("connect")
Mode = Section("mode")
Message = Section("message")
Field = Section("field")
Op = Section("op")


def message(template: str, **fields: str) -> str:
    """A ``Message`` template with its ``{field}``s filled in (the JVM's Protocol.message
    fills the same templates)."""
    for key, text in fields.items():
        template = template.replace("{" + key + "}", text)
    return template


def _java(text: Any) -> str:
    """A Java literal of ``text``: an int, a string, or a list of strings."""
    if isinstance(text, int) and not isinstance(text, bool):
        return str(text)
    if isinstance(text, (list, tuple)):
        return "Arrays.asList(" + ", ".join(_java(str(t)) for t in text) + ")"
    return json.dumps(str(text))  # JSON's string escapes are Java's


def _java_setting(s) -> str:
    """The JVM's Setting of one row of the settings table."""
    default = "" if s.default is None else s.default
    default = str(default).lower() if isinstance(default, bool) else str(default)
    choices = list(s.parse.options) if isinstance(s.parse, Choice) else None
    return (f"    public static final Setting {s.name.upper()} = new Setting({_java(s.name)},"
            f" {_java(s.spark)}, {_java(s.env)}, {_java(default)},"
            f" {'null' if choices is None else _java(choices)},"
            f" {'true' if s.parse is parse_bool else 'false'});\n")


def java_source() -> str:
    """The JVM module's ``zklock/Protocol.java``, generated when the jar is built: a nested
    class per section of protocol.properties, a constant per key (``Protocol.Field.VERSION``,
    typed as :func:`value` types it); a ``Setting`` per setting the JVM reads itself (an
    engine or JVM row of config.SETTINGS: its Spark conf key, environment variable, default
    and choices) and a constant per choice (``Protocol.Choice.ENGINE_MODE_REFUSE``); the
    session conf keys the engine carries with each lock request; the words of a boolean
    setting; and ``message``, which fills a Message template."""
    out = ["// Generated from zklock/spark/protocol.properties and zklock/config.py's settings",
           "// table by zklock/spark/protocol.py (java_source) when the jar is built: not a",
           "// source file. Change protocol.properties, or the settings table.",
           "package zklock;", "", "import java.util.Arrays;", "import java.util.List;", "",
           "public final class Protocol {"]
    for section, keys in SECTIONS.items():
        name = class_name(section)
        out.append(f"    public static final class {name} {{")
        for key, text in keys.items():
            v = value(text)
            kind = "int" if isinstance(v, int) else "String"
            out.append(f"        public static final {kind} {key.upper()} = {_java(v)};")
        out += [f"        private {name}() {{", "        }", "    }", ""]
    source = "\n".join(out) + "\n"
    read = [s for s in SETTINGS if s.engine or s.jvm]
    source += "".join(_java_setting(s) for s in read)
    source += ("\n    /** The choices of those settings that have them: ENGINE_MODE_REFUSE is"
               " engine_mode's \"refuse\". */\n    public static final class Choice {\n")
    for s in read:
        for option in s.parse.options if isinstance(s.parse, Choice) else ():
            source += (f"        public static final String {s.name.upper()}_"
                       f"{option.upper().replace('-', '_')} = {_java(option)};\n")
    source += "        private Choice() {\n        }\n    }\n"
    source += (f"\n    public static final List<String> CARRIED_KEYS = {_java(CARRIED_KEYS)};\n"
               f"    public static final List<String> TRUE_WORDS = {_java(TRUE_WORDS)};\n"
               f"    public static final List<String> FALSE_WORDS = {_java(FALSE_WORDS)};\n")
    source += """
    /** A Message template with each {field} of {@code fields} (field, value, field, value,
     *  ...) filled in, as zklock/spark/protocol.py's message. */
    public static String message(String template, String... fields) {
        String text = template;
        for (int i = 0; i + 1 < fields.length; i += 2) {
            text = text.replace("{" + fields[i] + "}", fields[i + 1]);
        }
        return text;
    }

    private Protocol() {
    }
}
"""
    return source
