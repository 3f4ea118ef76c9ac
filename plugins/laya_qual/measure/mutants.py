"""Automatic single-operator mutants of the runtime and the plugin: the whole
population, enumerated from each module's ``ast``, so that a sample drawn from it is
chosen by a seed, not by whoever wrote the tests.

A mutant is one node of one file replaced by one alternative (``ast.unparse`` of the
changed node, spliced over the node's exact byte span, so the rest of the file keeps
its bytes). Only mutants that still parse and change the module's syntax tree are in
the population. Each has two names: ``id`` (file, line and column: where it is now)
and ``key`` (file, enclosing function, operator, the text before and after, and
which occurrence of that change in the function: stable while unrelated code
moves), which is what a written equivalence reason is filed under.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import functools
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# The population: every module of these packages (import name -> catalogue prefix) ...
PACKAGES = {"laya": "laya", "laya_qual": "laya_qual"}
# ... except these, each for its reason (docs/mutation.md repeats them).
EXCLUDED = {
    "laya_qual/measure/defects.py": "data, not behaviour: the hand-written defect catalogue",
    "laya_qual/measure/mutation.py": "the mutation run itself: the suite it measures never executes it",
    "laya_qual/measure/mutants.py": "the mutant generator itself: the suite it measures never executes it",
}
OPERATORS = ("compare", "arithmetic", "boolean", "not-dropped", "constant", "statement-dropped",
             "arguments-swapped", "keyword-dropped", "slice-bound", "sibling-name")
NO_MUTATE = "pragma: no mutate"

_COMPARE = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
            ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
_ARITHMETIC = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Div,
               ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult, ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd,
               ast.LShift: ast.RShift, ast.RShift: ast.LShift, ast.MatMult: ast.Mult}
_DROPPABLE = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.Raise, ast.Continue,
              ast.Break, ast.Delete, ast.Assert)


@dataclass(frozen=True)
class Mutant:
    file: str  # relative to the import root, e.g. laya/serving/cache.py
    line: int
    col: int  # UTF-8 byte offsets, as ast gives them
    end_line: int
    end_col: int
    operator: str
    function: str  # enclosing qualified name, "<module>" at top level
    original: str
    replacement: str
    occurrence: int  # among the same (function, operator, original, replacement)
    at_import: bool = False  # runs when the module is imported: its body, a class body, a decorator, a default

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}:{self.col}:{self.operator}"

    @property
    def key(self) -> str:
        return (f"{self.file}:{self.function}:{self.operator}:{self.original!r}->{self.replacement!r}"
                f"#{self.occurrence}")

    def apply(self, text: str) -> str:
        """``text`` with this mutant spliced in; refuses a file that moved under it."""
        data = text.encode()
        start, end = _offset(data, self.line, self.col), _offset(data, self.end_line, self.end_col)
        if data[start:end].decode() != self.original:
            raise ValueError(f"mutant {self.id}: the file no longer holds {self.original!r} there")
        return (data[:start] + self.replacement.encode() + data[end:]).decode()


def _offset(data: bytes, line: int, col: int) -> int:
    start = 0
    for _ in range(line - 1):
        start = data.index(b"\n", start) + 1
    return start + col


# --- alternatives per node ------------------------------------------------------------------

def _with(node: ast.AST, **fields) -> ast.AST:
    """A copy of ``node`` with ``fields`` replaced; its other children are shared with the
    tree (they are only read: unparsed and dumped), which a deep copy per mutant made slow."""
    new = copy.copy(node)
    for name, value in fields.items():
        setattr(new, name, value)
    return new


def _alternatives(node: ast.AST, siblings: dict) -> Iterator[tuple[str, ast.AST | None]]:
    """(operator, replacement node) pairs; a None replacement means ``pass``."""
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in _COMPARE:
                ops = list(node.ops)
                ops[i] = _COMPARE[type(op)]()
                yield "compare", _with(node, ops=ops)
    elif isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        yield "arithmetic", _with(node, op=_ARITHMETIC[type(node.op)]())
    elif isinstance(node, ast.BoolOp):
        yield "boolean", _with(node, op=ast.Or() if isinstance(node.op, ast.And) else ast.And())
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
        yield "not-dropped", node.operand
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
        yield "constant", _with(node, value=not node.value)
    elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
        yield "constant", _with(node, value=node.value + 1)
        yield "constant", _with(node, value=node.value - 1)
    elif isinstance(node, ast.Call):
        args = node.args
        for i in range(len(args) - 1):
            if not any(isinstance(a, ast.Starred) for a in args[i:i + 2]) \
                    and ast.dump(args[i]) != ast.dump(args[i + 1]):
                swapped = list(args)
                swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
                yield "arguments-swapped", _with(node, args=swapped)
        for i, kw in enumerate(node.keywords):
            if kw.arg is not None:
                yield "keyword-dropped", _with(node, keywords=node.keywords[:i] + node.keywords[i + 1:])
    elif isinstance(node, ast.Slice):
        for bound in ("lower", "upper"):
            value = getattr(node, bound)
            if value is not None:
                for op in (ast.Add(), ast.Sub()):
                    yield "slice-bound", _with(node, **{bound: ast.BinOp(value, op, ast.Constant(1))})
    elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
        other = _next_sibling(siblings.get(("attr", ast.dump(node.value)), ()), node.attr)
        if other:
            yield "sibling-name", _with(node, attr=other)
    elif isinstance(node, ast.Subscript) and _str_key(node) is not None:
        other = _next_sibling(siblings.get(("key", ast.dump(node.value)), ()), _str_key(node))
        if other:
            yield "sibling-name", _with(node, slice=ast.Constant(other))
    elif isinstance(node, ast.Dict):
        keys = node.keys
        for i in range(len(keys) - 1):
            if all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in keys[i:i + 2]):
                swapped = list(keys)
                swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
                yield "sibling-name", _with(node, keys=swapped)
    if isinstance(node, ast.AugAssign) and type(node.op) in _ARITHMETIC:
        yield "arithmetic", _with(node, op=_ARITHMETIC[type(node.op)]())
    if isinstance(node, _DROPPABLE):
        yield "statement-dropped", None


def _str_key(node: ast.Subscript) -> str | None:
    s = node.slice
    return s.value if isinstance(s, ast.Constant) and isinstance(s.value, str) else None


def _next_sibling(names, name: str) -> str | None:
    """The next other name in sorted order (wrapping): one deterministic sibling."""
    ordered = sorted(set(names))
    if len(ordered) < 2 or name not in ordered:
        return None
    return ordered[(ordered.index(name) + 1) % len(ordered)]


def _siblings(tree: ast.AST) -> dict:
    """Attribute names and string keys read from each base expression in the module."""
    out: dict = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            out.setdefault(("attr", ast.dump(node.value)), set()).add(node.attr)
        elif isinstance(node, ast.Subscript) and _str_key(node) is not None:
            out.setdefault(("key", ast.dump(node.value)), set()).add(_str_key(node))
    return out


# --- walking a module ---------------------------------------------------------------------

def _skipped_children(node: ast.AST) -> set[int]:
    """Subtrees never mutated: docstrings, annotations, f-string internals."""
    skip: list[ast.AST] = []
    body = getattr(node, "body", None)
    if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body \
            and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        skip.append(body[0])
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns:
        skip.append(node.returns)
    if isinstance(node, ast.arg) and node.annotation:  # a parameter's, under the def's arguments
        skip.append(node.annotation)
    if isinstance(node, ast.AnnAssign):
        skip.append(node.annotation)
    if isinstance(node, ast.JoinedStr):
        skip += node.values
    return {id(s) for s in skip}


def _walk(tree: ast.Module) -> Iterator[tuple[ast.AST, str, bool]]:
    """Every mutable node with its enclosing qualified name and whether it runs when the
    module is imported: a function's decorators, defaults and annotations run where the
    function is defined, its body only when it is called; a class body runs where the
    class is defined."""
    def visit(node: ast.AST, scope: list[str], at_import: bool) -> Iterator[tuple[ast.AST, str, bool]]:
        skipped = _skipped_children(node)
        inner = scope + [node.name] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
            else scope
        called = _called_parts(node)
        for child in ast.iter_child_nodes(node):
            if id(child) in skipped:
                continue
            child_at_import = at_import and id(child) not in called
            yield child, ".".join(inner) or "<module>", child_at_import
            yield from visit(child, inner, child_at_import)
    yield from visit(tree, [], True)


def _called_parts(node: ast.AST) -> set[int]:
    """The ids of the children of ``node`` that run only when a function is called: a
    def's or a lambda's body (not its defaults, annotations or decorators)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return {id(n) for n in node.body}
    if isinstance(node, ast.Lambda):
        return {id(node.body)}
    return set()


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def module_mutants(source: str, file: str) -> list[Mutant]:
    """Every valid single-operator mutant of one module, in source order."""
    return list(_module_mutants(source, file))


@functools.lru_cache(maxsize=None)
def _module_mutants(source: str, file: str) -> tuple[Mutant, ...]:
    """Cached by the module's text: one process enumerates the same code once."""
    tree = ast.parse(source)
    siblings = _siblings(tree)
    lines = source.splitlines(keepends=True)
    starts = [0]  # byte offset of each line's start
    for line in lines:
        starts.append(starts[-1] + len(line.encode()))
    data = source.encode()
    tops = _top_level_spans(tree)
    quiet = {id(n) for t in ast.walk(tree) if _type_checking(t) for n in ast.walk(t)}
    out: list[Mutant] = []
    seen: Counter = Counter()
    for node, function, at_import in _walk(tree):
        if id(node) in quiet or not hasattr(node, "end_lineno") or isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if NO_MUTATE in lines[node.lineno - 1]:
            continue
        original = data[starts[node.lineno - 1] + node.col_offset:
                        starts[node.end_lineno - 1] + node.end_col_offset].decode()
        for operator, new in _alternatives(node, siblings):
            if new is not None and ast.dump(new) == ast.dump(node):
                continue
            replacement = "pass" if new is None else _spelled(new, node)
            ident = (function, operator, original, replacement)
            mutant = Mutant(file, node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, operator,
                            function, original, replacement, seen[ident], at_import)
            if not replacement.startswith("(") and not _parses_in(mutant, lines, tops):
                continue  # a parenthesized expression or ``pass`` is valid wherever its node was
            out.append(mutant)
            seen[ident] += 1
    return tuple(out)


def _top_level_spans(tree: ast.Module) -> list[tuple[int, int]]:
    """(first line, decorators included; last line) of each top-level statement."""
    return [(min(n.lineno for n in ast.walk(top) if hasattr(n, "lineno")), top.end_lineno) for top in tree.body]


def _parses_in(mutant: Mutant, lines: list[str], tops: list[tuple[int, int]]) -> bool:
    """Whether the module still parses with ``mutant`` in it, found by parsing only the
    top-level statement around it (whether one top-level statement parses does not
    depend on the others): parsing the whole file again per mutant was most of the time
    it took to enumerate the population."""
    first, last = next((a, b) for a, b in tops if a <= mutant.line <= b)
    moved = dataclasses.replace(mutant, line=mutant.line - first + 1, end_line=mutant.end_line - first + 1)
    try:
        ast.parse(moved.apply("".join(lines[first - 1:last])))
    except SyntaxError:
        return False
    return True


def _spelled(new: ast.AST, old: ast.AST) -> str:
    """Source for a replacement node; an expression is parenthesized so precedence and
    line continuations of the spot it goes into cannot change its meaning."""
    text = ast.unparse(ast.fix_missing_locations(new))
    bare = isinstance(old, (ast.Constant, ast.Name, ast.Slice)) or not isinstance(old, ast.expr)
    return text if bare else f"({text})"


# --- the population and the sample ------------------------------------------------------------

def module_files(layout: dict[str, Path]) -> list[tuple[str, Path]]:
    """(catalogue path, file) of every module in the population, sorted."""
    files = []
    for name, prefix in PACKAGES.items():
        root = layout[name]
        nested = {p for n, p in layout.items() if n.startswith(name + ".")}  # suite/ and synth/ are not the plugin
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" in path.parts or any(n in path.parents for n in nested):
                continue
            rel = f"{prefix}/{path.relative_to(root).as_posix()}"
            if rel not in EXCLUDED:
                files.append((rel, path))
    return sorted(files)


def population(layout: dict[str, Path]) -> list[Mutant]:
    """Every mutant of every module, in (file, position) order: what a sample is drawn from."""
    return [m for rel, path in module_files(layout) for m in module_mutants(path.read_text(), rel)]


def sample(mutants: list[Mutant], n: int, seed: int) -> list[Mutant]:
    """``n`` mutants drawn uniformly without replacement, reproducible from ``seed``."""
    if not 1 <= n <= len(mutants):
        raise ValueError(f"a sample of {n} from a population of {len(mutants)}")
    return random.Random(seed).sample(mutants, n)


def population_table(mutants: list[Mutant]) -> str:
    """Population size per module and per operator, as ``laya-qual mutate --population`` prints it."""
    by_file = Counter(m.file for m in mutants)
    by_operator = Counter(m.operator for m in mutants)
    width = max(map(len, by_file), default=4)
    lines = [f"{'MODULE':<{width}} {'MUTANTS':>7}"]
    lines += [f"{f:<{width}} {c:>7}" for f, c in sorted(by_file.items())]
    lines.append(f"{'all':<{width}} {len(mutants):>7}")
    lines.append("by operator: " + ", ".join(f"{op} {by_operator[op]}" for op in OPERATORS))
    return "\n".join(lines) + "\n"
