"""Accounting, parent reproducibility and the plan command (no processes spawned)."""

from __future__ import annotations

from click.testing import CliRunner

from laya.evolution.accounting import flop_model, projection, stream_bytes
from laya.evolution.cli import evolve
from laya.evolution.layouts import Layout
from laya.evolution.parent import CONFIGS, init_parent, read_parent, write_parent


def test_projection_counts_streams():
    cfg = CONFIGS["parent-1.7b"]
    assert stream_bytes(cfg, 8) == 8 * 1024 * 2048 * 4
    appended = projection(cfg, Layout("appended"), batches=128, microbatch=8)
    control = projection(cfg, Layout("fixed-tail"), batches=128, microbatch=8)
    assert appended["stream_bytes"] == 128 * 8 * 1024 * 2048 * 4 == control["stream_bytes"]
    assert control["total_bytes"] == 2 * appended["total_bytes"]


def test_1_7b_config_is_1_7b_parameters():
    assert 1.6e9 < CONFIGS["parent-1.7b"].total_params() < 1.8e9


def test_flop_limit_grows_with_the_frozen_prefix():
    shallow = flop_model(CONFIGS["tiny"], Layout("appended"))
    deep = flop_model(CONFIGS["seed-cpu"], Layout("appended"))
    assert 1 < shallow["limit"] < deep["limit"]


def test_parent_is_reproducible_from_its_seed(tmp_path):
    cfg = CONFIGS["tiny"]
    first = write_parent(tmp_path / "a.safetensors", cfg, init_parent(cfg, 5))
    second = write_parent(tmp_path / "b.safetensors", cfg, init_parent(cfg, 5))
    other = write_parent(tmp_path / "c.safetensors", cfg, init_parent(cfg, 6))
    assert first == second != other
    config, state, digest = read_parent(tmp_path / "a.safetensors")
    assert config == cfg and digest == first and len(state) == 4 + 12 * cfg.depth


def test_plan_prints_the_seed_statement_next_to_the_projection():
    out = CliRunner().invoke(evolve, ["plan"])
    assert out.exit_code == 0, out.output
    assert "8.59 GB per stream" in out.output and "17.18 GB" in out.output
    assert "occupies 13.82 GB" in out.output
