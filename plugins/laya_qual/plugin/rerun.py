"""The command line that reproduces a qualification run: the same selection, artifact
and device options, suite profile and Hypothesis seed; the output options (report,
evidence, signing key) are left out, since they change where results go, not what runs,
and so are the shard options: a shard's evidence replays as the whole run it is part of."""

from __future__ import annotations

import shlex

import pytest

OUTPUT_OPTIONS = ("--laya-report", "--laya-signing-key", "--laya-evidence-out", "--laya-evidence-in")
SHARD_OPTIONS = ("--laya-shard", "--laya-durations", "--laya-plan")
PINNED_OPTIONS = ("--hypothesis-seed", "--laya-profile")  # re-added below with the values in force


def _without(args: list[str], names: tuple[str, ...]) -> list[str]:
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        name, eq, _ = arg.partition("=")
        if name in names:
            skip = not eq
            continue
        kept.append(arg)
    return kept


def _loads_plugin(args: list[str]) -> bool:
    return "-playa_qual" in args or any(a == "-p" and b == "laya_qual" for a, b in zip(args, args[1:]))


def reproduce_command(config: pytest.Config, seed: str | None) -> str:
    """`python -m pytest ...` to run from the directory the original run started in.
    Absolute local paths outside that directory read `<local path>` (nothing local is
    signed): substitute your own artifact directories."""
    from laya_qual.plugin.hooks import suite_profile
    from laya_qual.report.provenance import portable_args
    from laya_qual.subjects import package_dir

    args = _without([str(a) for a in config.invocation_params.args], OUTPUT_OPTIONS + SHARD_OPTIONS + PINNED_OPTIONS)
    args = portable_args(args, config.invocation_params.dir, package_dir("laya_qual.suite"))
    prefix = [] if _loads_plugin(args) else ["-p", "laya_qual"]
    pinned = ["--laya-profile", suite_profile(config)]
    if seed is not None:
        pinned += ["--hypothesis-seed", str(seed)]
    return shlex.join(["python", "-m", "pytest", *prefix, *args, *pinned])
