"""The `laya` command line's declared surface, and the reference it is held to (cli.reference).

``laya-cli-reference.json`` (shipped beside this module, so an installed suite needs no
repository) holds, per command path (``laya``, ``laya base import``, ...), the command's help
text, its subcommands and help option names, and per parameter, in declaration order, what
click declares: name, kind, option strings, type (with its flags: exists, file_okay,
choices, range bounds, ...), required, nargs, multiple, default, help text, show_default,
metavar, flag settings, hidden, envvar. ``describe()`` reads the same from the live CLI,
resolving the lazily loaded commands through the `laya` group, as a user's command line does.

The reference changes only on purpose, when the CLI does::

    python -m laya_qual.suite.cli_reference --write      # rewrite laya-cli-reference.json
    python -m laya_qual.suite.cli_reference --markdown > docs/cli.md

docs/cli.md, the users' option reference, is ``markdown()`` of the reference
(tests/test_cli_docs.py keeps the two equal).
"""

from __future__ import annotations

import inspect
import json
import re
import sys
from pathlib import Path
from typing import Any

import click

REFERENCE = Path(__file__).with_name("laya-cli-reference.json")
FORMAT = "laya-cli-reference-v1"
# What each parameter's entry holds, in this order: click's Parameter.to_info_dict fields and
# the attributes it leaves out (metavar, show_default, a Path's path_type).
FIELDS = ("name", "kind", "opts", "secondary_opts", "metavar", "type", "required", "default", "show_default",
          "help", "nargs", "multiple", "is_flag", "flag_value", "count", "hidden", "envvar")
TERMINAL_WIDTH = 80


def _plain(value: Any) -> Any:
    """JSON's view of a value (tuples become lists), so live and stored entries compare equal."""
    return json.loads(json.dumps(value))


def _param(param: click.Parameter) -> dict[str, Any]:
    info = param.to_info_dict() | {"name": param.name, "kind": param.param_type_name, "metavar": param.metavar}
    if isinstance(param.type, click.Path):
        info["type"]["path_type"] = getattr(param.type.type, "__name__", None)
    if isinstance(param, click.Option):
        info["show_default"] = param.show_default
    return _plain({k: info[k] for k in FIELDS if k in info})


def describe(root: click.Command | None = None, name: str = "laya") -> dict[str, dict[str, Any]]:
    """Every command reachable from ``root`` (default: `laya`) as {command path: entry}."""
    if root is None:
        from laya.cli import main as root
    commands: dict[str, dict[str, Any]] = {}

    def walk(command: click.Command, path: str, parent: click.Context | None) -> None:
        ctx = click.Context(command, info_name=path.rsplit(" ", 1)[-1], parent=parent, **command.context_settings)
        help_option = command.get_help_option(ctx)
        entry: dict[str, Any] = {
            "help": command.help, "short_help": command.short_help, "epilog": command.epilog,
            "hidden": command.hidden, "help_option_names": command.get_help_option_names(ctx),
            "params": [_param(p) for p in command.get_params(ctx) if p is not help_option],
        }
        if isinstance(command, click.Group):
            entry["subcommands"] = command.list_commands(ctx)
        commands[path] = _plain(entry)
        for sub in entry.get("subcommands", []):
            resolved = command.get_command(ctx, sub)  # a lazy command is imported here, as when it runs
            if resolved is None:
                raise LookupError(f"{path} lists {sub!r} but cannot resolve it")
            walk(resolved, f"{path} {sub}", ctx)

    walk(root, name, None)
    return commands


def commands_on(path: str, root: click.Command | None = None) -> list[click.Command]:
    """The command objects a user's ``path`` (``laya evolve check``) passes through, root first
    (``root``: the command ``path``'s first word names, default `laya`)."""
    if root is None:
        from laya.cli import main as root
    chain, ctx = [root], click.Context(root, info_name=path.split()[0], **root.context_settings)
    for name in path.split()[1:]:
        command = chain[-1].get_command(ctx, name)
        if command is None:
            raise LookupError(f"{path}: no command {name!r}")
        chain.append(command)
        ctx = click.Context(command, info_name=name, parent=ctx, **command.context_settings)
    return chain


def load(path: Path = REFERENCE) -> dict[str, dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("format") != FORMAT:
        raise ValueError(f"{path}: format {data.get('format')!r}, expected {FORMAT!r}")
    return data["commands"]


def dumps(commands: dict[str, dict[str, Any]]) -> str:
    """The reference file's text: a command's fields a line each, a parameter a line."""
    def line(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    blocks = []
    for path, entry in commands.items():
        fields = [f'   {line(k)}: {line(v)}' for k, v in entry.items() if k != "params"]
        params = ",\n".join(f"    {line(p)}" for p in entry["params"])
        fields.append('   "params": [' + (f"\n{params}\n   ]" if params else "]"))
        blocks.append(f"  {line(path)}: {{\n" + ",\n".join(fields) + "\n  }")
    text = f'{{\n "format": {line(FORMAT)},\n "commands": {{\n' + ",\n".join(blocks) + "\n }\n}\n"
    assert json.loads(text) == {"format": FORMAT, "commands": commands}
    return text


# --- comparison -----------------------------------------------------------------------------

def differences(live: dict[str, dict[str, Any]], reference: dict[str, dict[str, Any]]) -> list[str]:
    """Each way ``live`` differs from ``reference``: one line naming the command, the parameter and
    the field (empty: equal)."""
    found = [f"{path}: a command the reference does not have" for path in live if path not in reference]
    found += [f"{path}: missing (the reference has it)" for path in reference if path not in live]
    for path in (p for p in reference if p in live):
        have, want = live[path], reference[path]
        for field in sorted((set(have) | set(want)) - {"params"}):
            if have.get(field) != want.get(field):
                found.append(f"{path}: {field} is {have.get(field)!r}, the reference says {want.get(field)!r}")
        params = {p["name"]: p for p in have["params"]}
        wanted = {p["name"]: p for p in want["params"]}
        found += [f"{path} {label(params[n])}: a parameter the reference does not have" for n in params
                  if n not in wanted]
        found += [f"{path} {label(wanted[n])}: missing (the reference has it)" for n in wanted if n not in params]
        for name in (n for n in wanted if n in params):
            p, w = params[name], wanted[name]
            for field in sorted(set(p) | set(w)):
                if field == "type":
                    for key in sorted(set(p["type"]) | set(w["type"])):
                        if p["type"].get(key) != w["type"].get(key):
                            found.append(f"{path} {label(w)}: type.{key} is {p['type'].get(key)!r}, "
                                         f"the reference says {w['type'].get(key)!r}")
                elif p.get(field) != w.get(field):
                    found.append(f"{path} {label(w)}: {field} is {p.get(field)!r}, the reference says {w.get(field)!r}")
        shared = [n for n in params if n in wanted]
        if shared != [n for n in wanted if n in params]:
            found.append(f"{path}: parameters in the order {shared}, the reference says "
                         f"{[n for n in wanted if n in params]}")
    return found


def label(param: dict[str, Any]) -> str:
    """How a user names a parameter: its longest option string, or an argument's metavar."""
    if param["kind"] == "argument":
        return (param.get("metavar") or param["name"]).upper()
    return max(param["opts"], key=len)


def usage_word(param: dict[str, Any]) -> str:
    """An argument as click's usage line writes it: ``NAME``, ``[NAME]`` when optional, then
    ``...`` when it takes many."""
    word = label(param) if param["required"] else f"[{label(param)}]"
    return word + "..." * (param["nargs"] != 1)


# --- what `--help` says ---------------------------------------------------------------------

def _words(text: str) -> str:
    return " ".join(text.split())


def _flowed(text: str) -> str:
    """``text`` as --help's wrapped lines read once joined: click drops the ``\\b`` (keep these
    lines) marker and may break a line after a hyphen, so ``dev-key`` can read ``dev- key``."""
    return re.sub(r"(?<=-) ", "", _words(text.replace("\b", "")))


def _shown_default(default: Any) -> str:
    if isinstance(default, list):
        return ", ".join(map(str, default))
    return str(default)


def help_problems(path: str, entry: dict[str, Any], output: str) -> list[str]:
    """What ``output``, the `--help` of command ``path`` (prog name: ``path``'s first word),
    fails to say of the reference ``entry``: its usage (each argument as click writes it:
    ``[NAME]`` when optional, ``NAME...`` when it takes many) and help text, each subcommand,
    and per option, in the option's own row: its option strings, help text, ``[required]``,
    shown default, metavar or choices."""
    found = []
    usage = output.split("\n", 1)[0]
    if not usage.startswith(f"Usage: {path} "):
        found.append(f"{path}: the usage line is {usage!r}")
    for param in (p for p in entry["params"] if p["kind"] == "argument"):
        if usage_word(param) not in usage.split():
            found.append(f"{path} {label(param)}: not in the usage line {usage!r}")
    if entry["help"] and _flowed(entry["help"]) not in _flowed(output):
        found.append(f"{path}: the help text is not in --help")
    if "subcommands" in entry:
        listed = output.partition("\nCommands:\n")[2]
        found += [f"{path} {sub}: not listed under Commands" for sub in entry["subcommands"]
                  if not re.search(rf"^  {re.escape(sub)}\s", listed, re.M)]
    section = output.partition("\nOptions:\n")[2].partition("\nCommands:\n")[0]
    rows = [p for p in entry["params"] if p["kind"] == "option"]
    starts = []
    for param in rows:
        found_at = re.search(rf"^  (?:\S+, )*{re.escape(label(param))}(?=[ ,\n]|$)", section, re.M)
        if found_at is None:
            found.append(f"{path} {label(param)}: no row in --help's Options")
        starts.append(found_at.start() if found_at else None)
    placed = [s for s in starts if s is not None]
    if placed != sorted(placed):
        found.append(f"{path}: --help lists the options in another order than declared")
    ends = sorted(placed) + [len(section)]
    for param, start in zip(rows, starts):
        if start is None:
            continue
        row = _words(section[start:ends[ends.index(start) + 1]])
        name = f"{path} {label(param)}"
        found += [f"{name}: --help's row lacks {opt!r}" for opt in param["opts"] + param["secondary_opts"]
                  if opt not in row.replace(",", " ").split()]
        if param["help"] and _flowed(param["help"]) not in _flowed(row):
            found.append(f"{name}: --help's row lacks its help text {param['help']!r}")
        if param["required"] and "[required]" not in row:
            found.append(f"{name}: --help's row does not say [required]")
        show = param.get("show_default")
        pair = param["is_flag"] and param["secondary_opts"]  # --x/--no-x: click shows the chosen one's name
        if show and param["default"] is not None and not (param["is_flag"] and not pair and param["default"] is False):
            value = (re.sub(r"^(\W)\1?", "", (param["opts"] if param["default"] else param["secondary_opts"])[0])
                     if pair else _shown_default(param["default"]))
            shown = f"default: {value}" if show is True else f"default: ({show})"
            if not re.search(rf"(?:\[|; ){re.escape(shown)}[;\]]", row):
                found.append(f"{name}: --help's row does not show [{shown}]")
        elif "[default:" in row and "[default:" not in (param["help"] or ""):
            found.append(f"{name}: --help's row shows a default the reference does not")
        if param.get("metavar") and param["metavar"] not in row:
            found.append(f"{name}: --help's row lacks the metavar {param['metavar']!r}")
        elif not param.get("metavar") and not param["is_flag"] and param["type"]["param_type"] != "Choice" \
                and param["type"]["name"].upper() not in row:  # DIRECTORY, FILE, INTEGER RANGE, ...
            found.append(f"{name}: --help's row lacks the value's name {param['type']['name'].upper()!r}")
        for choice in param["type"].get("choices") or []:
            if choice not in row:
                found.append(f"{name}: --help's row lacks the choice {choice!r}")
    for opt in entry["help_option_names"]:
        if not re.search(rf"^  (?:\S+, )*{re.escape(opt)}(?=[ ,\n]|$)", section, re.M):
            found.append(f"{path} {opt}: no row in --help's Options")
    return found


# --- docs/cli.md ----------------------------------------------------------------------------

def _cell(text: str) -> str:
    return _words(text).replace("|", "\\|")


def type_text(param: dict[str, Any]) -> str:
    t = param["type"]
    kind = t.get("param_type")
    if param.get("is_flag"):
        text = "flag"
    elif param.get("metavar"):
        text = f"`{param['metavar']}`"
    elif kind == "Choice":
        text = "one of " + ", ".join(f"`{c}`" for c in t["choices"])
    elif kind == "Path":
        text = {"directory": "directory", "file": "file"}.get(t["name"], "path")
        text += " (must exist)" if t.get("exists") else ""
    elif kind in ("IntRange", "FloatRange"):
        text = "integer" if kind == "IntRange" else "number"
        low, high = t.get("min"), t.get("max")
        if low is not None and high is not None:
            text += f" in {'(' if t.get('min_open') else '['}{low}, {high}{')' if t.get('max_open') else ']'}"
        elif low is not None:
            text += f" {'>' if t.get('min_open') else '≥'} {low}"
        elif high is not None:
            text += f" {'<' if t.get('max_open') else '≤'} {high}"
    else:
        text = {"Int": "integer", "Float": "number", "String": "text", "Bool": "boolean"}.get(kind, t.get("name", ""))
    return text + (" (repeatable)" if param["multiple"] else "")


def default_text(param: dict[str, Any]) -> str:
    if param["required"]:
        return "required"
    if param.get("is_flag"):
        return "off" if param["default"] in (False, None) else "on"
    return "" if param["default"] is None else f"`{_shown_default(param['default'])}`"


LAYA_PREAMBLE = ("# The `laya` command line", "",
                 "Generated from the qualification suite's `laya-cli-reference.json` by "
                 "`python -m laya_qual.suite.cli_reference --markdown`; do not edit by hand. The claim "
                 "`cli.reference` checks that the installed `laya` declares exactly these commands, options, "
                 "types, defaults and help texts, and that each command's `--help` says them.", "")


def markdown(commands: dict[str, dict[str, Any]], preamble: tuple[str, ...] = LAYA_PREAMBLE) -> str:
    """The option reference page of ``commands`` (their root first), under ``preamble``'s lines."""
    root = next(iter(commands))
    lines = [*preamble,
             "Every command also takes " + ", ".join(f"`{o}`" for o in commands[root]["help_option_names"])
             + " (print its help and exit). An empty default means the option is unset unless given.", ""]
    for path, entry in commands.items():
        arguments = [p for p in entry["params"] if p["kind"] == "argument"]
        usage = f"{path} [OPTIONS]" + "".join(f" {usage_word(p)}" for p in arguments)
        lines += [f"## `{path}`", "", "```", usage + (" COMMAND [ARGS]..." if "subcommands" in entry else ""), "```", ""]
        if entry["help"]:
            lines += [re.sub("^\x08\n", "", inspect.cleandoc(entry["help"]), flags=re.M), ""]  # click's \b line
        if "subcommands" in entry:
            lines += ["Commands: " + ", ".join(f"`{path} {s}`" for s in entry["subcommands"]) + ".", ""]
        if entry["params"]:
            lines += ["| option | value | default | meaning |", "|---|---|---|---|"]
            for p in entry["params"]:
                names = (", ".join(f"`{o}`" for o in p["opts"] + p["secondary_opts"]) if p["kind"] == "option"
                         else f"`{label(p)}` (argument)")
                cells = (names, _cell(type_text(p)), _cell(default_text(p)), _cell(p["help"] or ""))
                lines.append("| " + " | ".join(cells) + " |")
            lines.append("")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if argv == ["--write"]:
        REFERENCE.write_text(dumps(describe()), encoding="utf-8")
        print(f"wrote {REFERENCE}", file=sys.stderr)
        return 0
    if argv == ["--markdown"]:
        sys.stdout.write(markdown(load()))
        return 0
    print("usage: python -m laya_qual.suite.cli_reference --write | --markdown", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
