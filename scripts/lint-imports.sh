#!/usr/bin/env bash
# Check the import contracts in .importlinter on the package as it is installed: zklock/
# with cli/ and scheduler/ inside it as zklock.cli and zklock.scheduler (setup.cfg
# package_dir). import-linter reads the source tree, which keeps them apart. The contracts'
# module lists are derived from that tree (@core, @packages), not written by hand.
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
"$venv/bin/python" - "$tree" <<'PY'
import sys
from pathlib import Path

tree = Path(sys.argv[1])
package = tree / "zklock"
layers = {"spark", "testing", "cli", "scheduler"}
core = sorted(f"zklock.{p.stem}" for p in package.iterdir()
              if p.stem not in layers and p.stem != "__init__"
              and (p.suffix == ".py" or (p / "__init__.py").exists()))
packages = sorted(".".join(p.parent.relative_to(tree).parts) for p in package.rglob("__init__.py"))
text = Path(".importlinter").read_text()
text = text.replace("    @core\n", "".join(f"    {m}\n" for m in core))
text = text.replace("    @packages\n", "".join(f"    {m}\n" for m in packages))
(tree / ".importlinter").write_text(text)
PY
cd "$tree"
PYTHONPATH="$PWD:$OLDPWD/scripts" "../../$venv/bin/lint-imports" --config .importlinter
