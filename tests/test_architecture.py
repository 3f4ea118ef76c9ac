"""The layout rules of docs/architecture.md, read from the source so they cannot rot.

Every import statement of every module is read with ``ast`` (function-level imports
too: a lazy import is still a dependency), relative imports resolved, and each
module's room checked against what that room may import. Every runtime module must
belong to exactly one room, so a new module has to be placed before it can land.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from laya_qual import HARNESS
from laya_qual.claims import CLAIMS

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"laya": ROOT / "laya", "laya_qual": ROOT / "plugins" / "laya_qual"}

# The runtime's rooms (docs/architecture.md): serving, training, evolution, command line.
TRAINING = {"laya.training", "laya.training.calibration", "laya.training.dataset", "laya.training.export", "laya.training.features", "laya.training.head_training",
            "laya.training.pipeline", "laya.training.quantize", "laya.training.scoring", "laya.training.thresholds", "laya.training.train_cli"}
SERVING = {"laya", "laya.artifact", "laya.serving", "laya.serving.adapters", "laya.artifact.manifest", "laya.artifact.atomic", "laya.serving.base", "laya.serving.batch", "laya.artifact.binding", "laya.serving.cache",
           "laya.serving.cancel", "laya.serving.config", "laya.serving.encoder", "laya.errors", "laya.serving.finite", "laya.serving.gate",
           "laya.serving.head_network", "laya.training.importer", "laya.interrupts", "laya.serving.jsonl", "laya.serving.loading", "laya.serving.rendering",
           "laya.serving.request", "laya.artifact.text", "laya.artifact.weights"}
COMMAND_LINE = {"laya.cli"}
# What evolution may take from the rest of the runtime: its errors and the byte-level helpers.
EVOLUTION_MAY_USE = {"laya", "laya.errors", "laya.artifact.atomic", "laya.artifact.binding"}
# What the report verifier may take from the runtime: no numerics, only errors and file writing.
VERIFIER_MAY_USE = {"laya", "laya.errors", "laya.artifact.atomic"}
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


def violations(rooms: set[str], allowed) -> list[str]:
    return sorted(f"{m} imports {i}" for m in rooms & GRAPH.keys() for i in GRAPH[m] if not allowed(i))


def test_every_runtime_module_has_one_room():
    evolution = {m for m in GRAPH if m.startswith("laya.evolution")}
    runtime = {m for m in GRAPH if top(m) == "laya"}
    rooms = [SERVING, TRAINING, COMMAND_LINE, evolution]
    assert sorted(runtime - set().union(*rooms)) == [], "place the new module in a room (docs/architecture.md)"
    assert sum(len(r) for r in rooms) == len(set().union(*rooms)), "a module sits in two rooms"
    assert set().union(*rooms) <= runtime, "a room names a module that no longer exists"


def test_serving_imports_neither_training_nor_evolution_nor_the_plugin():
    assert violations(SERVING, lambda i: i not in TRAINING and i not in COMMAND_LINE
                      and not i.startswith("laya.evolution") and top(i) not in {"laya_qual", *TEST_TOOLS,
                                                                                  *ORACLE_LIBRARIES}) == []


def test_training_imports_neither_evolution_nor_the_plugin():
    assert violations(TRAINING, lambda i: i not in COMMAND_LINE and not i.startswith("laya.evolution")
                      and top(i) not in {"laya_qual", *TEST_TOOLS, *ORACLE_LIBRARIES}) == []


def test_evolution_takes_only_errors_and_bytes_from_the_runtime():
    evolution = {m for m in GRAPH if m.startswith("laya.evolution")}
    assert violations(evolution, lambda i: (i.startswith("laya.evolution") or i in EVOLUTION_MAY_USE
                                            or top(i) not in {"laya", "laya_qual", *TEST_TOOLS, *ORACLE_LIBRARIES})) == []


def test_the_runtime_imports_neither_the_plugin_nor_the_harness():
    """Serving installs the runtime without the qualify extra (docs/decisions.md)."""
    runtime = {m for m in GRAPH if top(m) == "laya"}
    assert violations(runtime, lambda i: top(i) not in {"laya_qual", *HARNESS_MODULES}) == []


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


def test_runtime_modules_import_no_circle():
    """A circle (laya.serving.batch <-> laya.serving.loading was one) means neither module can be read, tested or
    changed alone; the module a circle passes through last sees the other half-initialised."""
    packages = {module_name(p) for p in PACKAGES["laya"].rglob("__init__.py")}
    assert import_cycles({m for m in GRAPH if top(m) == "laya"} - packages) == []


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
