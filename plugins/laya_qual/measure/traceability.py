"""The traceability map: which tests hold each documented field and rule.

Every field of a documented format and every normative rule in docs/ carries a stable id,
written as an empty anchor ``<a id="F-..."></a>`` (a field) or ``<a id="R-..."></a>`` (a
rule) right after the field's name or the rule's words. ``traceability.json`` (shipped
with this package, so an installed harness can compute its figure) gives each id its
doc, kind, a short text and either ``tests`` (portable test ids that change exactly that
field or break exactly that rule and check the documented consequence) or ``gap`` (a
written reason why no test does yet; counted as not covered).

The report carries the figure as ``suite.traceability`` (docs/report-format.md);
docs/claims.md shows the matrix (``matrix_markdown``). The project's
tests/test_traceability.py keeps the docs, the map and the tests consistent (docs/ is not
installed, so parsing the docs is for that test and for maintainers).
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

FORMAT = "laya-qual-traceability-v1"
MAP_PATH = Path(__file__).with_name("traceability.json")
# An id: F- or R-, then letters, digits, '_', '.', '-' (no brackets: list entries are
# named by the list, e.g. F-head.task.name for tasks[i].name).
ID = re.compile(r'<a id="([FR]-[A-Za-z0-9_.-]+)"></a>')
KINDS = {"F": "field", "R": "rule"}


def doc_ids(docs_dir: str | Path) -> dict[str, str]:
    """Every id written in the docs' Markdown files: ``{id: file name}``. An id written
    twice (in one doc or two) is refused: an id names one place."""
    found: dict[str, str] = {}
    for path in sorted(Path(docs_dir).glob("*.md")):
        for match in ID.finditer(path.read_text(encoding="utf-8")):
            ident = match.group(1)
            if ident in found:
                raise ValueError(f"{ident} is written twice ({found[ident]}, {path.name})")
            found[ident] = path.name
    return found


@lru_cache(maxsize=1)
def _loaded(path: str) -> dict[str, Any]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if data.get("format") != FORMAT:
        raise ValueError(f"{path}: format is {data.get('format')!r}, expected {FORMAT!r}")
    return data


def load_map(path: str | Path = MAP_PATH) -> dict[str, Any]:
    """The map: ``{"format": ..., "ids": {id: {"doc", "kind", "text", "tests" | "gap"}}}``."""
    return _loaded(str(path))


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def covered(entry: dict[str, Any]) -> bool:
    return bool(entry.get("tests")) and "gap" not in entry


def figure(trace: dict[str, Any] | None = None) -> dict[str, Any]:
    """The report's ``suite.traceability``: fields and rules covered of total, the map's
    digest and the ids no test holds yet."""
    trace = load_map() if trace is None else trace
    counts = {kind: {"covered": 0, "total": 0} for kind in ("field", "rule")}
    gaps = []
    for ident, entry in trace["ids"].items():
        kind = KINDS[ident[0]]
        counts[kind]["total"] += 1
        if covered(entry):
            counts[kind]["covered"] += 1
        else:
            gaps.append(ident)
    return {"fields": counts["field"], "rules": counts["rule"],
            "mapDigest": hashlib.sha256(canonical(trace)).hexdigest(), "gaps": sorted(gaps)}


def line(fig: dict[str, Any]) -> str:
    """One line for a terminal: "fields and rules covered R of T (...)"."""
    f, r = fig["fields"], fig["rules"]
    return (f"fields and rules covered {f['covered'] + r['covered']} of {f['total'] + r['total']} "
            f"(fields {f['covered']}/{f['total']}, rules {r['covered']}/{r['total']}; "
            f"{len(fig['gaps'])} gaps; map sha256:{fig['mapDigest'][:16]})")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def matrix_markdown(trace: dict[str, Any] | None = None) -> list[str]:
    """docs/claims.md's traceability section (lines), generated from the map."""
    trace = load_map() if trace is None else trace
    fig = figure(trace)
    out = ["## Traceability: documented fields and rules to tests", "",
           "Generated from `laya_qual/measure/traceability.json`. Every field of a documented format and every "
           "normative rule in docs/ has a stable id (`F-...` a field, `R-...` a rule), written in the doc "
           "as an anchor right after the field or the rule; the map names the tests that change exactly "
           "that field or break exactly that rule and check the documented consequence, or says why no "
           "test does yet (a gap, not covered). The report carries the figure as `suite.traceability` "
           "(docs/report-format.md); tests/test_traceability.py fails on an id without an entry, an "
           "entry without an id, a test that does not exist, or this table stale.", "",
           f"**{line(fig)}**", ""]
    docs: dict[str, list[str]] = {}
    for ident in trace["ids"]:
        docs.setdefault(trace["ids"][ident]["doc"], []).append(ident)
    for doc in sorted(docs):
        out += [f"### {doc}", "", "| Id | What | Tests |", "|---|---|---|"]
        for ident in docs[doc]:
            entry = trace["ids"][ident]
            held = ("<br>".join(f"`{t}`" for t in entry["tests"]) if covered(entry)
                    else f"**gap**: {_cell(entry['gap'])}")
            out.append(f"| [`{ident}`]({doc}#{ident}) | {_cell(entry['text'])} | {held} |")
        out.append("")
    return out


def test_file(test_id: str, root: str | Path) -> tuple[Path, list[str]]:
    """Where a portable test id lives in a checkout: ``laya_qual/suite/F::T`` is
    ``qualification/F``, any other ``F::T`` is ``F`` under ``root``; and the name parts
    after the file (a function, or a class and its method)."""
    file, *names = test_id.split("::")
    prefix = "laya_qual/suite/"
    relative = "qualification/" + file[len(prefix):] if file.startswith(prefix) else file
    return Path(root) / relative, names


def defines(path: Path, names: list[str]) -> bool:
    """Whether the Python file defines ``def test_...`` (or ``class Test...`` with that
    method) at the top level, read with ast, never imported."""
    import ast

    if not path.is_file() or not names or not 1 <= len(names) <= 2:
        return False
    scope: list[ast.stmt] = ast.parse(path.read_text(encoding="utf-8")).body
    for depth, name in enumerate(names):
        last = depth == len(names) - 1
        kinds = (ast.FunctionDef, ast.AsyncFunctionDef) if last else (ast.ClassDef,)
        found = next((node for node in scope if isinstance(node, kinds) and node.name == name), None)
        if found is None or (last and not name.startswith("test")):
            return False
        scope = getattr(found, "body", [])
    return True


def check(docs_dir: str | Path, trace: dict[str, Any], root: str | Path,
          claims_md: str | None = None) -> list[str]:
    """Every inconsistency between the docs, the map and the tests (empty: none)."""
    problems = []
    written = doc_ids(docs_dir)
    for ident in sorted(set(written) - set(trace["ids"])):
        problems.append(f"{ident} ({written[ident]}) has no entry in the map")
    for ident in sorted(set(trace["ids"]) - set(written)):
        problems.append(f"{ident} is in the map but in no doc")
    for ident, entry in trace["ids"].items():
        if ident in written and entry.get("doc") != written[ident]:
            problems.append(f"{ident}: the map says {entry.get('doc')}, it is written in {written[ident]}")
        if entry.get("kind") != KINDS.get(ident[:1]):
            problems.append(f"{ident}: kind {entry.get('kind')!r}, but its prefix says {KINDS.get(ident[:1])!r}")
        if not isinstance(entry.get("text"), str) or not entry["text"].strip():
            problems.append(f"{ident}: no text")
        has_tests, has_gap = "tests" in entry, "gap" in entry
        if has_tests == has_gap:
            problems.append(f"{ident}: needs exactly one of tests or gap")
        elif has_gap and (not isinstance(entry["gap"], str) or len(entry["gap"].split()) < 5):
            problems.append(f"{ident}: a gap needs a written reason")
        elif has_tests and (not isinstance(entry["tests"], list) or not entry["tests"]):
            problems.append(f"{ident}: tests must be a non-empty list")
        for test_id in entry.get("tests", []) if has_tests and isinstance(entry["tests"], list) else []:
            path, names = test_file(test_id, root)
            if not defines(path, names):
                problems.append(f"{ident}: names {test_id}, which does not exist")
    if claims_md is not None and "\n".join(matrix_markdown(trace)) not in claims_md:
        problems.append("docs/claims.md's traceability matrix is stale: laya-qual claims --markdown > docs/claims.md")
    return problems
