#!/usr/bin/env bash
# Check the import contracts in .importlinter on the package as it is installed: zklock/
# with cli/ and scheduler/ inside it as zklock.cli and zklock.scheduler (setup.cfg
# package_dir). import-linter reads the source tree, which keeps them apart.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${VENV:-.venv}"
tree="build/import-graph"
rm -rf "$tree"
mkdir -p "$tree"
cp -r zklock "$tree/zklock"
cp -r cli "$tree/zklock/cli"
cp -r scheduler "$tree/zklock/scheduler"
find "$tree" -name __pycache__ -prune -exec rm -rf {} +
cd "$tree"
PYTHONPATH="$PWD" "../../$venv/bin/lint-imports" --config ../../.importlinter
