"""Virtual environments as users install zklock: its wheel (`make dist`), in a venv of the
system's Python, with or without PySpark; shared by the tests that run zklock as deployed
(tests/scripts/test_build_dist.py, tests/cli/test_docs_commands.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyspark

ROOT = Path(__file__).resolve().parents[1]

#: The official apache/spark images' user: uid 185, no home.
SPARK_UID = 185
#: What an operator's host installs with the wheel: its dependencies (setup.cfg), and the
#: timeline extra's; never the spark extra.
OPERATOR_DEPENDENCIES = ["kazoo", "click", "croniter", "prometheus_client", "matplotlib"]


def link_dependencies(names: list[str], target: Path) -> None:
    """Link the installed distributions ``names`` and everything they require (this suite's
    copies, no download) into ``target``, a path entry for another venv: a venv with
    exactly those packages and, unless one requires it, no PySpark."""
    import importlib.metadata as md
    import re

    target.mkdir()
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = re.split(r"[\s;<>=!~\[(]", todo.pop())[0].lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:  # a requirement of another Python or platform
            continue
        todo += [r for r in dist.requires or () if "extra ==" not in r]
        for entry in {f.parts[0] for f in dist.files or () if f.parts[0] != ".."}:
            source = Path(str(dist.locate_file(entry)))
            if source.exists() and not (target / entry).exists():
                (target / entry).symlink_to(source)
    assert "pyspark" not in seen and "py4j" not in seen, seen


def system_python() -> str:
    """A Python of this version that every user may run, as an image's is (this suite's
    may live under a home only its owner can enter: pyenv's under /root)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3", sys.executable):
        probe = subprocess.run([candidate, "-c", "import sys, venv; print(sys.version_info[:2])"],
                               capture_output=True, text=True)
        public = all(os.stat(p).st_mode & 0o001 for p in Path(candidate).resolve().parents)
        if probe.returncode == 0 and probe.stdout.strip() == str(sys.version_info[:2]) and public:
            return candidate
    raise AssertionError(f"no Python {sys.version_info[:2]} that uid {SPARK_UID} may run")


def operator_venv(base: Path, wheel: Path) -> Path:
    """A venv of the system's Python with the wheel installed without the spark extra: its
    Python."""
    venv = base / "venv"
    subprocess.run([system_python(), "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    str(wheel)], check=True, timeout=300)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], capture_output=True, text=True, check=True)
    link_dependencies(OPERATOR_DEPENDENCIES, base / "deps")
    Path(site.stdout.strip(), "operator-dependencies.pth").write_text(f"{base / 'deps'}\n")
    found = subprocess.run([str(python), "-c", "import pyspark"], capture_output=True)
    assert found.returncode != 0, "the operator's venv must not find PySpark"
    return python


def build_wheel(out: Path) -> Path:
    """`make dist`'s wheel, with the jar of the installed Spark's line, into ``out``."""
    subprocess.run([sys.executable, str(ROOT / "scripts" / "build_dist.py"), "--spark",
                    pyspark.__version__, "--out", str(out)], check=True, timeout=900)
    return next(out.glob("zklock-*.whl"))
