"""`zklock monitoring`: the alert rules and the dashboard zklock ships, to install as they are."""

from __future__ import annotations

from typing import Optional

import click

from zklock.observe import monitoring as shipped

from .app import cli


@cli.group()
def monitoring() -> None:
    """Prometheus alert rules and a Grafana dashboard for zklock's metrics.

    Example: zklock monitoring rules > /etc/prometheus/rules/zklock.yml
    """


@monitoring.command("rules")
@click.option("--runbook-base", metavar="URL",
              help="Where your copy of docs/operations.md is served: each alert's runbook"
                   " link becomes URL#<alert> (default: relative to zklock's docs).")
def rules(runbook_base: Optional[str]) -> None:
    """Print zklock's Prometheus alert rules (a rule file; promtool checks it).

    Each alert has a summary and a runbook link to docs/operations.md ("Alerts").

    Example: zklock monitoring rules --runbook-base https://wiki.example.com/zklock/operations
    """
    click.echo(shipped.rules(runbook_base), nl=False)


@monitoring.command("dashboard")
def dashboard() -> None:
    """Print zklock's Grafana dashboard (JSON: import it, pick the Prometheus datasource).

    Example: zklock monitoring dashboard > zklock-dashboard.json
    """
    click.echo(shipped.dashboard(), nl=False)
