"""An import-linter contract type for offline-eval's lint (named in pyproject.toml; the package itself never imports it).

`acyclic_modules`: no module reaches itself through imports, deferred ones inside functions included. The built-in
`acyclic_siblings` compares sibling modules only, so a circle that passes through a package's own __init__
(backends.base -> backends.fingerprint -> backends.registry -> backends -> backends.base) is no cycle between
siblings and passes it; this contract follows every edge between modules."""

from __future__ import annotations

from typing import Any

from importlinter import Contract, ContractCheck, fields, output


class AcyclicModulesContract(Contract):
    type_name = "acyclic_modules"

    root = fields.StringField()

    def check(self, graph: Any, verbose: bool) -> ContractCheck:
        root = str(self.root)
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
