"""Bitwise equality of the feature learner and the distributed incremental kernel."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from laya.evolution.check import run_arms
from laya.evolution.layouts import Layout
from laya.evolution.parent import ParentConfig
from laya.evolution.workspace import Experiment


@st.composite
def experiments(draw, layout: str) -> Experiment:
    heads = draw(st.sampled_from([1, 2]))
    config = ParentConfig(vocab=draw(st.integers(16, 64)), width=heads * draw(st.sampled_from([4, 8, 12])),
                          heads=heads, depth=draw(st.integers(2, 4)), seq_len=draw(st.integers(4, 10)))
    if layout == "appended":
        chosen = Layout("appended", tail_blocks=draw(st.integers(1, 2)), cut=draw(st.integers(0, config.depth)))
    else:
        chosen = Layout("fixed-tail")
    cut = chosen.cut_layer(config)
    return Experiment(config=config, layout=chosen, parent_seed=draw(st.integers(0, 2**16)),
                      tail_seed=draw(st.integers(0, 2**16)), data_seed=draw(st.integers(0, 2**16)),
                      microbatch=draw(st.integers(1, 3)), microbatches=draw(st.integers(1, 4)),
                      split=draw(st.integers(0, cut)), updates=8)


def _assert_exact(group, workspaces, exp: Experiment) -> None:
    ws = workspaces.fresh(exp)
    result = run_arms(group, ws)
    assert len(result.rows) == 8
    assert [r["microbatch"] for r in result.rows] == exp.schedule()
    mismatched = [(r["update"], r["differences"][:4]) for r in result.rows if not r["equal"]]
    assert not mismatched, f"kernel and learner differ: {mismatched}"
    # the packets really came from disk, and the learner trained on certified ones
    assert all(ws.packet(i).joinpath("features.safetensors").is_file() for i in set(exp.schedule()))
    assert all(rec["certificate"] == result.certificates[rec["microbatch"]] for rec in result.learner["records"])


@pytest.mark.laya_claim("learner.exact.appended")
@given(exp=experiments("appended"))
def test_appended_layout_is_bitwise_exact(evolution_group, evolution_workspaces, exp):
    _assert_exact(evolution_group, evolution_workspaces, exp)


@pytest.mark.laya_claim("learner.exact.fixed-tail")
@given(exp=experiments("fixed-tail"))
def test_fixed_tail_control_is_bitwise_exact(evolution_group, evolution_workspaces, exp):
    _assert_exact(evolution_group, evolution_workspaces, exp)
