"""import-linter contracts of zklock's own, for what the built-in ones cannot say.

``load_time_forbidden``: the source modules do not import the forbidden ones *when they
load*. An import inside a function runs when the function is called, so ``zklock show``
on an operator's host without PySpark never loads the Spark layer, while ``zklock sql``
still may. The built-in ``forbidden`` contract counts every import wherever it stands;
this one follows only the imports a module runs at load (its top level, class bodies and
``if`` blocks, ``TYPE_CHECKING`` included), directly or through other modules, and
reports each chain it finds. A forbidden module may be an external package (``pyspark``),
with ``include_external_packages``.

Run by scripts/lint-imports.sh, from the assembled tree it works in (the current directory),
whose files it reads to tell where each import stands.
"""

from __future__ import annotations

import ast
import functools
from collections import deque
from pathlib import Path

from grimp import ImportGraph
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck
from importlinter.domain.helpers import module_expressions_to_modules


@functools.cache
def _lines_in_functions(module: str) -> frozenset[int]:
    """The line numbers of the import statements of ``module`` that stand in a function."""
    base = Path.cwd().joinpath(*module.split("."))
    path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    tree = ast.parse(path.read_text(), str(path))
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inside.update(n.lineno for n in ast.walk(node)
                          if isinstance(n, (ast.Import, ast.ImportFrom)))
    return frozenset(inside)


def _at_load(graph: ImportGraph, importer: str, imported: str) -> bool:
    details = graph.get_import_details(importer=importer, imported=imported)
    return any(d["line_number"] not in _lines_in_functions(importer) for d in details)


class LoadTimeForbiddenContract(Contract):
    """Source modules do not import forbidden modules (or their descendants) at load.

    Options: ``source_modules`` and ``forbidden_modules`` (module expressions, each taken
    with its descendants).
    """

    type_name = "load_time_forbidden"

    source_modules = fields.SetField(subfield=fields.ModuleExpressionField())
    forbidden_modules = fields.SetField(subfield=fields.ModuleExpressionField())

    def _expand(self, graph: ImportGraph, expressions) -> set[str]:
        found: set[str] = set()
        for module in module_expressions_to_modules(graph, expressions):
            found.add(module.name)
            if not graph.is_module_squashed(module.name):  # (an external package is one node)
                found |= graph.find_descendants(module.name)
        return found

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        forbidden = self._expand(graph, self.forbidden_modules)
        sources = self._expand(graph, self.source_modules) - forbidden
        chains = []
        for source in sorted(sources):
            chain = self._load_chain(graph, source, forbidden)
            if chain:
                chains.append(chain)
        return ContractCheck(kept=not chains, metadata={"chains": chains})

    @staticmethod
    def _load_chain(graph: ImportGraph, source: str, forbidden: set[str]) -> list[str]:
        """The shortest chain of load-time imports from ``source`` to a forbidden module,
        or an empty list."""
        came_from: dict[str, str] = {source: ""}
        queue = deque([source])
        while queue:
            module = queue.popleft()
            for imported in sorted(graph.find_modules_directly_imported_by(module)):
                if imported in came_from or not _at_load(graph, module, imported):
                    continue
                came_from[imported] = module
                if imported in forbidden:
                    chain = [imported]
                    while came_from[chain[-1]]:
                        chain.append(came_from[chain[-1]])
                    return chain[::-1]
                queue.append(imported)
        return []

    def render_broken_contract(self, check: ContractCheck) -> None:
        for chain in check.metadata["chains"]:
            output.print_error(" -> ".join(chain) + " (each at load)")
            output.new_line()
