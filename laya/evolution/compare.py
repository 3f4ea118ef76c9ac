"""Bitwise comparison of two arms' update records (torch.equal only, never a tolerance)."""

from __future__ import annotations

import torch


def _differences(a: dict, b: dict) -> list[str]:
    diffs = [k for k in ("loss", "grad_norm") if not torch.equal(a[k], b[k])]
    if a["params"].keys() != b["params"].keys():
        return diffs + ["params: different parameter names"]
    for name in a["params"]:
        if not torch.equal(a["params"][name], b["params"][name]):
            diffs.append(f"param {name}")
        for key in ("step", "exp_avg", "exp_avg_sq"):
            if not torch.equal(a["adam"][name][key], b["adam"][name][key]):
                diffs.append(f"adam {name}.{key}")
    return diffs


def compare(kernel: list[dict], learner: list[dict]) -> list[dict]:
    """One row per update: both losses and grad norms, and every differing tensor."""
    if len(kernel) != len(learner):
        raise ValueError(f"kernel ran {len(kernel)} updates, learner {len(learner)}")
    rows = []
    for k, l in zip(kernel, learner):
        diffs = _differences(k, l)
        rows.append({"update": k["update"], "microbatch": k["microbatch"], "kernel_loss": k["loss"].item(),
                     "learner_loss": l["loss"].item(), "kernel_grad_norm": k["grad_norm"].item(),
                     "learner_grad_norm": l["grad_norm"].item(), "equal": not diffs, "differences": diffs})
    return rows
