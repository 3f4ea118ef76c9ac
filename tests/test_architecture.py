"""The layout rules of docs/architecture.md, read from the source so they cannot rot.

Every import statement of every module is read with ``ast`` (function-level imports
too: a lazy import is still a dependency), relative imports resolved, and each
module's folder checked against what that folder may import. Every module must belong to
a folder of ``MAY_IMPORT``, so a new module has to be placed before it can land.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from laya_qual import HARNESS
from laya_qual.claims import CLAIMS

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"laya": ROOT / "laya", "laya_qual": ROOT / "plugins" / "laya_qual"}

RUNTIME = {"laya", "laya.errors", "laya.interrupts", "laya.artifact", "laya.serving", "laya.training",
           "laya.evolution", "laya.cli"}
HARNESS_BASICS = {"laya_qual", "laya_qual.claims", "laya_qual.subjects"}
# Each folder (a subpackage, or a top-level module) and the project folders it may import
# besides itself (docs/architecture.md). Read top to bottom, nothing imports a folder below it.
MAY_IMPORT = {
    "laya.errors": set(),
    "laya.interrupts": set(),
    "laya.artifact": {"laya.errors"},
    "laya.serving": {"laya.errors", "laya.artifact"},
    "laya": {"laya.errors", "laya.serving"},  # the public face re-exports serving's names
    "laya.training": {"laya", "laya.errors", "laya.artifact", "laya.serving"},
    "laya.evolution": {"laya.errors", "laya.artifact"},  # bytes only: see EVOLUTION_MAY_USE
    "laya.cli": RUNTIME - {"laya.cli"},
    "laya_qual": set(),
    "laya_qual.claims": set(),
    "laya_qual.subjects": set(),
    "laya_qual.measure": HARNESS_BASICS,
    "laya_qual.report": {*HARNESS_BASICS, "laya_qual.measure", "laya.errors", "laya.artifact"},
    "laya_qual.plugin": {*HARNESS_BASICS, "laya_qual.measure", "laya_qual.report", *RUNTIME - {"laya.cli"}},
    "laya_qual.release": {*HARNESS_BASICS, "laya_qual.measure", "laya_qual.report", "laya_qual.plugin"},
    "laya_qual.bench": {"laya", "laya.errors", "laya.serving"},
    "laya_qual.cli": {*HARNESS_BASICS, "laya_qual.measure", "laya_qual.report", "laya_qual.plugin",
                      "laya_qual.release", "laya.errors", "laya.artifact", "laya.interrupts"},
}
# What evolution may take from the rest of the runtime: its errors and the byte-level helpers.
EVOLUTION_MAY_USE = {"laya", "laya.errors", "laya.artifact", "laya.artifact.atomic", "laya.artifact.binding"}
# What the report verifier may take from the runtime: no numerics, only errors and file writing.
VERIFIER_MAY_USE = {"laya", "laya.errors", "laya.artifact", "laya.artifact.atomic"}
TEST_TOOLS = {"pytest", "hypothesis", "_pytest", "xdist", "pytest_benchmark"}
ORACLE_LIBRARIES = {"scipy", "transformers"}  # the suite's independent references, never the runtime's
# What `pip install laya-qual` leaves out (the qualify extra): the runtime imports none of it.
HARNESS_MODULES = {"_pytest", *HARNESS.values()}


def module_name(path: Path) -> str:
    for package, folder in PACKAGES.items():
        if folder in path.parents or path == folder:
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    raise ValueError(path)


def read_imports(path: Path) -> set[str]:
    """Every module ``path`` imports, absolute, with each parent package it passes through."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # `from laya.serving import loading`
    return found


def project_graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for folder in PACKAGES.values() for p in folder.rglob("*.py")}
    return {name: {i for i in read_imports(path) if i in modules or i.split(".")[0] not in PACKAGES}
            for name, path in modules.items()}


GRAPH = project_graph()


def top(name: str) -> str:
    return name.split(".")[0]


def reachable(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(i for i in GRAPH.get(name, ()) if i in GRAPH)
    return seen


def folder_of(module: str) -> str | None:
    """The folder of MAY_IMPORT a module sits in: a subpackage, or the top-level module itself."""
    if module in MAY_IMPORT:
        return module
    package = ".".join(module.split(".")[:2])
    return package if package in MAY_IMPORT else None


def project_imports(module: str) -> set[str]:
    return {i for i in GRAPH[module] if top(i) in PACKAGES}


def test_every_module_sits_in_a_folder_with_rules():
    assert sorted(m for m in GRAPH if folder_of(m) is None) == [], "place the new module (docs/architecture.md)"
    assert sorted(f for f in MAY_IMPORT if not any(folder_of(m) == f for m in GRAPH)) == [], \
        "a rule names a folder that no longer exists"


@pytest.mark.parametrize("folder", sorted(MAY_IMPORT))
def test_a_folder_imports_only_the_folders_it_may(folder):
    allowed = MAY_IMPORT[folder] | {folder}
    assert sorted(f"{m} imports {i}" for m in GRAPH if folder_of(m) == folder
                  for i in project_imports(m) if folder_of(i) not in allowed) == []


def test_evolution_takes_only_errors_and_bytes_from_the_runtime():
    assert sorted(f"{m} imports {i}" for m in GRAPH if folder_of(m) == "laya.evolution"
                  for i in project_imports(m) if folder_of(i) != "laya.evolution"
                  and i not in EVOLUTION_MAY_USE) == []


def test_the_runtime_imports_neither_the_plugin_nor_the_harness():
    """Serving installs the runtime without the qualify extra (docs/decisions.md)."""
    assert sorted(f"{m} imports {i}" for m in GRAPH if top(m) == "laya" for i in GRAPH[m]
                  if top(i) in {"laya_qual", *HARNESS_MODULES}) == []


def import_cycles(modules: set[str]) -> list[list[str]]:
    """Every set of ``modules`` that import each other round in a circle (strongly connected
    components of more than one module), packages left out: ``from laya import x`` passes
    through the package's name, not through its lazy re-exports."""
    graph = {m: {i for i in GRAPH[m] if i in modules} for m in modules}
    reaches = {m: reachable_in(graph, m) for m in graph}
    return sorted({tuple(sorted(m2 for m2 in reaches[m] if m in reaches[m2])) for m in graph
                   if any(m in reaches[i] for i in graph[m])})


def reachable_in(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), list(graph[start])
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(graph[name])
    return seen


def test_no_modules_import_each_other_round_in_a_circle():
    """A circle (laya.serving.batch <-> laya.serving.loading, laya_qual.plugin.hooks <->
    laya_qual.plugin.selection were two) means neither module can be read, tested or changed
    alone; the module a circle passes through last sees the other half-initialised."""
    packages = {module_name(p) for folder in PACKAGES.values() for p in folder.rglob("__init__.py")}
    assert import_cycles(set(GRAPH) - packages) == []


def test_the_report_verifier_needs_neither_pytest_nor_the_runtime():
    """`laya-qual verify` checks a report offline; it must not run, or trust, what it qualifies."""
    closure = reachable("laya_qual.report.verify")
    external = {top(i) for m in closure for i in GRAPH[m] if i not in GRAPH}
    assert external & {*TEST_TOOLS, "torch", "numpy", "safetensors", "tokenizers"} == set()
    assert sorted(m for m in closure if top(m) == "laya" and m not in VERIFIER_MAY_USE) == []


def suite_claim_areas(path: Path) -> list[tuple[str, str]]:
    """(test name, area of its first claim) for each claim-tied test of a suite file."""
    found = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef):
            for call in (c for d in node.decorator_list for c in ast.walk(d) if isinstance(c, ast.Call)):
                if isinstance(call.func, ast.Attribute) and call.func.attr == "laya_claim" and call.args:
                    first = call.args[0]
                    text = first.value if isinstance(first, ast.Constant) else first.values[0].value
                    found.append((node.name, text.split(".")[0]))
                    break
    return found


@pytest.mark.parametrize("path", sorted((ROOT / "qualification").glob("test_*.py")), ids=lambda p: p.name)
def test_a_suite_file_holds_the_tests_of_one_claim_area(path):
    """`qualification/test_<area>[_<topic>].py`: a claim's tests are found by its area."""
    areas = {c.area for c in CLAIMS.values()}
    stem = path.stem.removeprefix("test_")
    area = next((a for a in sorted(areas, key=len, reverse=True) if stem == a or stem.startswith(a + "_")), None)
    assert area is not None, f"{path.name} is not named for a claim area ({sorted(areas)})"
    assert [(t, a) for t, a in suite_claim_areas(path) if a != area] == []
