"""import-linter contract types for offline-eval's lint (named in pyproject.toml; the package itself never imports it).

`acyclic_modules`: no module reaches itself through imports, deferred ones inside functions included, and the
imports a registry makes by name (`dynamic`: "importer -> pattern", `*` one name without dots). The built-in
`acyclic_siblings` compares sibling modules only, so a circle that passes through a package's own __init__
(backends.base -> backends.fingerprint -> backends.registry -> backends -> backends.base) is no cycle between
siblings and passes it; this contract follows every edge between modules.

`independent_children`: the child packages of a container (every task folder found beside its __init__), whatever
they are, import none of one another; a new one is covered without a config edit.

`reached_by_name`: the modules a pattern names (every engine module) are imported from nowhere outside their
`home` package: they are reached through its registry, by name."""

from __future__ import annotations

import copy
import importlib.util
import re
from pathlib import Path
from typing import Any

from importlinter import Contract, ContractCheck, fields, output


def _matching(graph: Any, pattern: str) -> list[str]:
    rx = re.compile("^" + re.escape(pattern).replace(r"\*", r"[^.]+") + "$")
    return sorted(m for m in graph.modules if rx.match(m))


def _edges(spec: str) -> tuple[str, str]:
    importer, _, pattern = spec.partition("->")
    return importer.strip(), pattern.strip()


class AcyclicModulesContract(Contract):
    type_name = "acyclic_modules"

    root = fields.StringField()
    dynamic = fields.ListField(subfield=fields.StringField(), required=False)

    def check(self, graph: Any, verbose: bool) -> ContractCheck:
        root = str(self.root)
        graph = copy.deepcopy(graph)  # the other contracts see the static imports only
        for spec in self.dynamic or []:  # type: ignore[union-attr]
            importer, pattern = _edges(str(spec))
            for imported in _matching(graph, pattern):
                if imported != importer:
                    graph.add_import(importer=importer, imported=imported)
        mine = sorted(m for m in graph.modules if m == root or m.startswith(root + "."))
        cycles: list[list[str]] = []
        seen: set[frozenset[str]] = set()
        for importer in mine:
            for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                if imported not in mine:
                    continue
                chain = graph.find_shortest_chain(importer=imported, imported=importer)
                if chain and frozenset(chain) not in seen:
                    seen.add(frozenset(chain))
                    cycles.append([importer, *chain])
        return ContractCheck(kept=not cycles, warnings=[], metadata={"cycles": cycles})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for cycle in check.metadata["cycles"]:
            output.print_error(" -> ".join(cycle), bold=False)
            output.new_line()


class IndependentChildrenContract(Contract):
    type_name = "independent_children"

    container = fields.StringField()
    shared = fields.ListField(subfield=fields.StringField(), required=False)  # children every one may import

    def check(self, graph: Any, verbose: bool) -> ContractCheck:
        container = str(self.container)
        shared = {f"{container}.{s}" for s in self.shared or []}  # type: ignore[union-attr]
        spec = importlib.util.find_spec(container)
        folders = [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
        children = sorted(
            f"{container}.{d.name}"
            for f in folders
            for d in f.iterdir()
            if (d / "__init__.py").is_file() and f"{container}.{d.name}" not in shared
        )
        found = [
            f"{a} imports {b}"
            for a in children
            for b in children
            if a != b and graph.chain_exists(importer=a, imported=b, as_packages=True)
        ]
        return ContractCheck(kept=not found, warnings=[], metadata={"found": found, "children": children})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for line in check.metadata["found"]:
            output.print_error(line, bold=False)
            output.new_line()


class ReachedByNameContract(Contract):
    type_name = "reached_by_name"

    home = fields.StringField()
    modules = fields.ListField(subfield=fields.StringField())  # patterns

    def check(self, graph: Any, verbose: bool) -> ContractCheck:
        home = str(self.home)
        named = {m for p in self.modules for m in _matching(graph, str(p))}  # type: ignore[attr-defined]
        found = [
            f"{importer} imports {m}"
            for m in sorted(named)
            for importer in sorted(graph.find_modules_that_directly_import(m))
            if not importer.startswith(home + ".")
        ]
        return ContractCheck(kept=bool(named) and not found, warnings=[], metadata={"found": found or ["no module"]})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for line in check.metadata["found"]:
            output.print_error(line, bold=False)
            output.new_line()
