"""Checks made before the first test runs: every path and pattern a qualification run
is given, so a mistake costs a second and one line naming the option and the fix,
not a whole suite of errors. The plugin raises the lines as ``pytest.UsageError``,
``laya-qual run`` as its own usage errors before it starts pytest.

An artifact's file roles are written out here from docs/artifact-v1.md rather than
imported from the runtime: the check must not rest on the code under qualification
(and loading the plugin imports no part of it). Only what makes a run pointless is
refused: a path that is no artifact directory, a head without head files, a manifest
that lacks a role or names a file the directory lacks. A manifest that cannot be
parsed is the suite's to judge (its claims fail on it, naming the loader's error).
"""

from __future__ import annotations

import difflib
import json
import tempfile
from pathlib import Path

MANIFEST = "manifest.json"
BASE_ROLES = ("encoder_config", "encoder_weights", "tokenizer", "special_tokens", "sequence_format")
HEAD_ROLES = ("head_config", "head_weights")
BASE_OPTION = {"--laya-artifact": "--laya-base", "--artifact": "--base"}  # a head option's base option


def artifact_problem(option: str, directory: str | Path, *, head: bool) -> str | None:
    """Why ``directory`` cannot be qualified as a head (``--laya-artifact``) or as the
    shared base (``--laya-base``), or None when it can be tried."""
    path = Path(directory)
    what = "a head artifact directory" if head else "the base artifact directory"
    if not path.exists():
        return f"{option} {directory}: no such directory; give {what} (one laya wrote, with {MANIFEST})"
    if not path.is_dir():
        return f"{option} {directory}: a file, not a directory; give {what}, not a file in it"
    if not (path / MANIFEST).is_file():
        return f"{option} {directory}: no {MANIFEST} in it, so not a laya artifact; give {what} laya wrote"
    try:
        files = json.loads((path / MANIFEST).read_text(encoding="utf-8"))["files"]
        listed = {entry["role"]: entry["path"] for entry in files}
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
        return None  # unreadable: the suite's claims judge it, naming the loader's error
    if head and not all(role in listed for role in HEAD_ROLES):
        return (f"{option} {directory}: {MANIFEST} lists no head ({', '.join(HEAD_ROLES)}): a base-only "
                f"artifact; give it as {BASE_OPTION[option]}, and a head built on it as {option}")
    roles = BASE_ROLES + HEAD_ROLES * head
    missing = [f"{listed[r]} (role {r})" for r in roles if r in listed and not (path / str(listed[r])).is_file()]
    if missing:
        return f"{option} {directory}: {', '.join(missing)} missing, though {MANIFEST} lists it; restore the artifact"
    unlisted = [r for r in BASE_ROLES if r not in listed]
    if unlisted:
        return f"{option} {directory}: {MANIFEST} lists no {', '.join(unlisted)}; give an artifact laya wrote"
    return None


def report_path_problem(option: str, report: str | Path) -> str | None:
    """Why the bundle cannot be written at ``report`` (its folders are made as needed)."""
    path = Path(report)
    if path.is_dir():
        return f"{option} {report}: a directory; give the bundle's file name (e.g. {path / 'report.intoto.jsonl'})"
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"{option} {report}: {parent} is a file, so no folder can be made there; choose another path"
    try:  # a real write, not os.access: it also sees read-only mounts, and root's limits
        with tempfile.TemporaryFile(dir=parent, prefix=".laya-qual-check-"):
            pass
    except OSError as e:
        return f"{option} {report}: cannot write in {parent} ({e.strerror or e}); choose a writable path"
    return None


def claims_problem(option: str, patterns: list[str], catalogue) -> str | None:
    """A ``--laya-claims`` pattern that selects no catalogued claim (a typo selects nothing)."""
    from laya_qual.measure.mutation import matches

    for pattern in patterns:
        if not any(matches([cid], [pattern]) for cid in catalogue):
            return f"{option} {pattern}: matches no claim{_did_you_mean(pattern, catalogue)}; see `laya-qual claims`"
    return None


def unknown_claims(ids, catalogue) -> list[str]:
    """One line per id that is no catalogued claim, with the nearest ids as a hint."""
    return [f"{cid}: no such claim{_did_you_mean(cid, catalogue)}" for cid in ids if cid not in catalogue]


def _did_you_mean(text: str, catalogue) -> str:
    """The nearest claim id, else the nearest area, as a hint (none when nothing is near)."""
    areas = sorted({cid.split(".")[0] for cid in catalogue})
    close = difflib.get_close_matches(text, list(catalogue), n=1, cutoff=0.75) or \
        difflib.get_close_matches(text, areas, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""
