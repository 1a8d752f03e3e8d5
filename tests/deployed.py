"""docs/deploy.md's ``spark-defaults.conf`` block, as tests read it: what a platform puts in
its Spark's conf directory (tests/core/test_deploy_doc.py checks every key of it; tests that
run Spark as deployed write it)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "deploy.md"


def spark_defaults(commented: bool = False) -> dict[str, str]:
    """The block's ``spark.*`` settings, in order; with ``commented``, the commented-out
    alternatives too (a later one replaces an earlier one of the same key)."""
    text = DOC.read_text()
    block = text[text.index("A complete `spark-defaults.conf`"):]
    body = re.search(r"```properties\n(.*?)```", block, re.S).group(1)
    conf = {}
    for line in body.splitlines():
        line = line.strip()
        if commented:
            line = line.lstrip("#").strip()
        if line.startswith("spark."):
            key, value = line.split(None, 1)
            conf[key] = value.strip()
    return conf


def dbt_hooks(indent: int) -> str:
    """The dbt model hooks deploy.md gives (its ``yaml`` block's ``+pre-hook`` and
    ``+post-hook`` lines), indented by ``indent`` spaces."""
    text = DOC.read_text()
    block = re.search(r"```yaml\n(.*?)```", text[text.index("### dbt, and other steps"):],
                      re.S).group(1)
    return "".join(" " * indent + line.strip() + "\n" for line in block.splitlines()
                   if line.strip().startswith(("+pre-hook", "+post-hook")))


@contextmanager
def shared_metastore(state: Path) -> Iterator[dict]:
    """``zklock metastore start`` (state under ``state``) on a free port, as a platform's
    applications share one; yields its status (``spark_conf`` joins it); stopped, and
    checked stopped, at the end."""
    from click.testing import CliRunner
    from zklock.cli.main import cli

    from zklock.servers.ports import free_port

    runner = CliRunner()
    started = runner.invoke(cli, ["--state-dir", str(state), "metastore", "start", "--port",
                                  str(free_port())])
    assert started.exit_code == 0, started.output
    status = runner.invoke(cli, ["--state-dir", str(state), "metastore", "status", "--json"])
    assert status.exit_code == 0, status.output
    yield json.loads(status.output)
    assert runner.invoke(cli, ["--state-dir", str(state), "metastore", "stop"]).output \
        == "stopped\n"
    after = runner.invoke(cli, ["--state-dir", str(state), "metastore", "status"])
    assert after.exit_code == 1 and after.output.startswith("not running")
