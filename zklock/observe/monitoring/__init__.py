"""zklock's Prometheus alert rules and Grafana dashboard, shipped with the package.

``rules.yml`` and ``dashboard.json`` beside this module are what ``zklock monitoring
rules`` and ``zklock monitoring dashboard`` print: data platform components ship theirs as
a mixin (rules and dashboards, tested), so that each team does not write its own PromQL
for "a lock held too long" or "no scheduler leads". tests/core/observe/test_monitoring.py
checks both with promtool and a real Prometheus scraping real zklock processes.
"""

from __future__ import annotations

from importlib import resources
from typing import Optional

#: What the rules' runbook links start with; ``runbook_base`` replaces it.
RUNBOOK_DOC = "docs/operations.md"


def rules(runbook_base: Optional[str] = None) -> str:
    """The alert rules (Prometheus's YAML); runbook links under ``runbook_base`` (the URL
    where your copy of docs/operations.md is served), else relative to zklock's docs."""
    text = resources.files(__package__).joinpath("rules.yml").read_text()
    if runbook_base:
        text = text.replace(f'"{RUNBOOK_DOC}#', f'"{runbook_base.rstrip("/")}#')
    return text


def dashboard() -> str:
    """The Grafana dashboard (JSON), with a Prometheus datasource variable."""
    return resources.files(__package__).joinpath("dashboard.json").read_text()
