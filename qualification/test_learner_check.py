"""learner.compare and learner.check.report: what `laya evolve check` says about the two arms.

Oracle: docs/evolution.md. The comparison uses torch.equal only, so a record that differs from its
twin in one tensor by one ulp (torch.nextafter) must be named by that tensor alone; the report
prints a `yes` row per equal update and `NO:` with the differing tensors, the size line of the
"Size" decision (tiny: 114,176 < 217,856 bytes), writes the rows and the per-update state digests
as JSON (equal between bitwise-equal arms, different from one update to the next since every
update changes the state), and exits 1 on any difference. The arms are a real run of both on the
session's group (tiny config, 2 updates).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import json
import tempfile
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from hypothesis import given

from laya.artifact.binding import state_digest
from laya.errors import DistributedError
from laya.evolution.accounting import flop_model
from laya.evolution.check import ArmsResult, run_arms
from laya.evolution.cli import check_experiment, evolve, report_check
from laya.evolution.compare import compare
from laya.evolution.kernel import LEARNER
from laya.evolution.layouts import Layout
from laya.evolution.workspace import Experiment, prepare
from laya_qual.synth import arms_records

EXP = Experiment(updates=2, microbatches=2, microbatch=1)


DEADLINE_S = 300.0


class Jobs:
    """The session's group, noting each job run_arms runs there: its ranks and its deadline."""

    def __init__(self, group):
        self.group, self.given = group, []

    def run(self, fn, *args, ranks=None, timeout_s=None, **kwargs):
        self.given.append((fn.__name__, ranks, timeout_s))
        return self.group.run(fn, *args, ranks=ranks, timeout_s=timeout_s, **kwargs)


@pytest.fixture(scope="module")
def jobs(evolution_group):
    return Jobs(evolution_group)


@pytest.fixture(scope="module")
def checked(jobs, tmp_path_factory):
    return run_arms(jobs, prepare(EXP, tmp_path_factory.mktemp("check")), timeout_s=DEADLINE_S)


@pytest.mark.laya_claim("learner.check.report")
def test_every_job_of_a_check_runs_where_documented_under_the_callers_deadline(checked, jobs):
    """run_arms(..., timeout_s=T) bounds each of its jobs by T, whatever the group's own default, and
    runs them where docs/evolution.md says: produce on all ranks, audit on rank 0, the kernel on all,
    the learner on rank 2 alone (None: every rank)."""
    assert jobs.given == [("produce", None, DEADLINE_S), ("audit", [0], DEADLINE_S),
                          ("run_kernel", None, DEADLINE_S), ("learn", [LEARNER], DEADLINE_S)]
    assert LEARNER == 2


def one_ulp_up(t: torch.Tensor) -> torch.Tensor:
    """t with its first element moved to the next float up."""
    t = t.clone()
    t.view(-1)[0] = torch.nextafter(t.view(-1)[0], torch.tensor(float("inf"), dtype=t.dtype))
    return t


def nudged(records: list[dict], update: int, path: tuple[str, ...]) -> list[dict]:
    """A deep copy of records with one tensor of one update moved one ulp (path into the record)."""
    records = copy.deepcopy(records)
    holder = records[update]
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = one_ulp_up(holder[path[-1]])
    return records


def a_param(checked) -> str:
    return sorted(checked.learner["records"][0]["params"])[-1]


@pytest.mark.laya_claim("learner.compare")
@pytest.mark.parametrize("where", ["loss", "grad_norm", "param", "step", "exp_avg", "exp_avg_sq"])
def test_one_ulp_in_one_tensor_is_named_alone(checked, where):
    kernel, name = checked.kernel[LEARNER]["records"], a_param(checked)
    path, named = {"loss": (("loss",), "loss"), "grad_norm": (("grad_norm",), "grad_norm"),
                   "param": (("params", name), f"param {name}")}.get(where, (("adam", name, where),
                                                                               f"adam {name}.{where}"))
    learner = nudged(checked.learner["records"], 1, path)
    rows = compare(kernel, learner)
    assert [(r["update"], r["equal"], r["differences"]) for r in rows] == [(0, True, []), (1, False, [named])]
    # each arm's loss and gradient norm under its own name, told apart where one was nudged
    assert [(r["kernel_loss"], r["learner_loss"], r["kernel_grad_norm"], r["learner_grad_norm"]) for r in rows] == [
        (k["loss"].item(), l["loss"].item(), k["grad_norm"].item(), l["grad_norm"].item())
        for k, l in zip(kernel, learner)]


@pytest.mark.laya_claim("learner.compare")
def test_other_parameter_names_or_another_length_are_not_compared(checked):
    kernel, learner = checked.kernel[LEARNER]["records"], copy.deepcopy(checked.learner["records"])
    learner[0]["params"]["tail.renamed"] = learner[0]["params"].pop(a_param(checked))
    assert compare(kernel, learner)[0]["differences"] == ["params: different parameter names"]
    with pytest.raises(ValueError, match="kernel ran 2 updates, learner 1"):
        compare(kernel, learner[:1])


def reported(result, tmp_path, capsys) -> tuple[list[str], str, dict, int]:
    """report_check's stdout lines, stderr, JSON and exit status."""
    out = tmp_path / "check.json"
    try:
        report_check(result, EXP, "tiny", out)
        status = 0
    except SystemExit as e:
        status = e.code
    printed = capsys.readouterr()
    return printed.out.splitlines(), printed.err, json.loads(out.read_text()), status


@pytest.mark.laya_claim("learner.check.report")
def test_equal_arms_are_reported_row_by_row_with_their_digests(checked, tmp_path, capsys):
    lines, err, figures, status = reported(checked, tmp_path, capsys)
    assert status == 0 and err == ""
    assert lines[0].split() == ["update", "mb", "kernel", "loss", "learner", "loss", "kernel", "|g|", "learner",
                                "|g|", "equal"]
    for line, row in zip(lines[1:3], checked.rows):
        assert line.split()[:2] == [str(row["update"]), str(row["microbatch"])] and line.endswith("  yes"), line
    assert "learner 114176 bytes < parent 217856 bytes" in lines
    assert figures["rows"] == checked.rows and figures["equal"] is True and figures["updates"] == 2
    # below the table, the figures the JSON holds, each on its own line in this order
    assert lines[1 + len(checked.rows):] == [
        f"feature production: {figures['production_seconds']:.3f} s ({figures['production_bytes_sent']} bytes sent)",
        f"distributed update: {figures['kernel_update_seconds'] * 1e3:.2f} ms ({figures['kernel_bytes_sent']} bytes "
        "sent over 2 updates, CPU copies over gloo)",
        f"local update:       {figures['learner_update_seconds'] * 1e3:.2f} ms",
        "learner 114176 bytes < parent 217856 bytes",
        f"FLOP-model limit: {figures['flop_model']['limit']:.2f}x",
        f"speedup: {figures['speedup']:.2f}x"], lines
    assert figures["handoff_device"] == "cpu"  # CPU ranks: gloo carries CPU copies
    digests = figures["state_digests"]
    assert len(digests) == 2 and all(d["kernel"] == d["learner"] for d in digests)
    assert digests[0]["kernel"] != digests[1]["kernel"]  # each update changes the tail and Adam state


def _digest(record: dict) -> str:
    """docs/evolution.md's state digest of one update: its parameters and Adam slots, by name."""
    state = {f"param/{name}": t for name, t in record["params"].items()}
    state |= {f"adam/{name}/{slot}": t for name, slots in record["adam"].items() for slot, t in slots.items()}
    return state_digest(state)


@pytest.mark.laya_claim("learner.check.report")
@given(arms_records(updates=EXP.updates))
def test_every_figure_of_the_json_follows_from_the_ranks_records(records):
    """docs/evolution.md's table of the check's figures, each from the rank and field it names, on
    records in which every rank's every value differs (so a figure from the wrong one shows)."""
    result = ArmsResult(production=records["production"], kernel=records["kernel"], learner=records["learner"],
                        certificates={}, rows=records["rows"])
    rank, learner = records["kernel"][2], records["learner"]
    kernel_mean = sum(rank["update_seconds"]) / len(rank["update_seconds"])
    local_mean = sum(learner["update_seconds"]) / len(learner["update_seconds"])
    expected = {
        "config": "tiny", "layout": EXP.layout.name, "updates": EXP.updates,
        "equal": all(r["equal"] for r in records["rows"]), "rows": records["rows"],
        "production_seconds": records["production"][2]["seconds"],
        "production_bytes_sent": sum(p["bytes_sent"] for p in records["production"]),
        "kernel_update_seconds": kernel_mean, "learner_update_seconds": local_mean, "speedup": kernel_mean / local_mean,
        "kernel_bytes_sent": sum(p["bytes_sent"] for p in records["kernel"]),
        "handoff_device": rank["handoff_device"],
        "learner_bytes": learner["learner_bytes"], "parent_bytes": learner["parent_bytes"],
        "flop_model": flop_model(EXP.config, EXP.layout),
        "state_digests": [{"kernel": _digest(k), "learner": _digest(l)}
                          for k, l in zip(rank["records"], learner["records"], strict=True)],
    }
    with tempfile.TemporaryDirectory() as tmp:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
                contextlib.suppress(SystemExit):  # exit 1 where a row differs
            report_check(result, EXP, "tiny", Path(tmp) / "check.json")
        text = (Path(tmp) / "check.json").read_text()
    written = json.loads(text)
    assert written == json.loads(json.dumps(expected)) and text == json.dumps(written, indent=2)


@pytest.mark.laya_claim("learner.check.report")
def test_without_json_the_same_report_is_printed_and_nothing_written(checked, tmp_path, capsys, monkeypatch):
    printed = reported(checked, tmp_path, capsys)[0]
    monkeypatch.chdir(tmp_path)
    report_check(checked, EXP, "tiny", None)
    assert capsys.readouterr().out.splitlines() == printed and [p.name for p in tmp_path.iterdir()] == ["check.json"]


@pytest.mark.laya_claim("learner.check.report")
@pytest.mark.parametrize("where", ["param", "exp_avg_sq"])
def test_a_difference_exits_1_naming_it(checked, tmp_path, capsys, where):
    name = a_param(checked)
    path, named = (("params", name), f"param {name}") if where == "param" else \
        (("adam", name, where), f"adam {name}.{where}")
    learner = nudged(checked.learner["records"], 1, path)
    different = dataclasses.replace(checked, learner=dict(checked.learner, records=learner),
                                    rows=compare(checked.kernel[LEARNER]["records"], learner))
    lines, err, figures, status = reported(different, tmp_path, capsys)
    assert status == 1 and "MISMATCH: kernel and learner are not bitwise equal" in err
    assert lines[1].endswith("  yes") and lines[2].endswith(f"  NO: {named}"), lines[1:3]
    assert figures["equal"] is False
    digests = figures["state_digests"]
    assert digests[0]["kernel"] == digests[0]["learner"] and digests[1]["kernel"] != digests[1]["learner"]
    # each arm's digest under its own name: the kernel's, untouched, is the one an equal report gives
    untouched = reported(checked, tmp_path, capsys)[2]["state_digests"]
    assert [d["kernel"] for d in digests] == [d["kernel"] for d in untouched], (digests, untouched)


@pytest.mark.laya_claim("learner.check.report")
def test_the_command_runs_both_arms_on_its_own_group_and_reports_them(checked, tmp_path, monkeypatch):
    """`laya evolve check` end to end, on three ranks of its own: exit 0, and the rows and
    state digests it writes are those of the same experiment run on the session's group; its
    workspace was a `laya-evolve-*` directory under TMPDIR, gone when the check ended."""
    from laya.evolution import workspace

    out, scratch, roots = tmp_path / "cli.json", tmp_path / "scratch", []
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.setattr(workspace, "prepare", lambda exp, root: roots.append(root) or prepare(exp, root))
    done = CliRunner().invoke(evolve, ["check", "--layout", "appended", "--updates", "2", "--microbatches", "2",
                                       "--microbatch", "1", "--json", str(out)])
    assert done.exit_code == 0, done.output
    [root] = roots
    assert root.parent == scratch and root.name.startswith("laya-evolve-") and not root.exists()
    figures = json.loads(out.read_text())
    assert figures["equal"] is True and figures["updates"] == 2 and figures["rows"] == checked.rows
    assert [d["kernel"] for d in figures["state_digests"]] == [d["learner"] for d in figures["state_digests"]]
    assert "learner 114176 bytes < parent 217856 bytes" in done.output.splitlines()


@pytest.mark.laya_claim("learner.check.report")
def test_a_group_that_misses_its_deadline_is_exit_2_not_a_difference(tmp_path):
    """`--timeout-s` bounds each job of the command's own group: one far too short stops the
    group, and the command says why on stderr with exit 2 (1 is a bitwise difference), no
    traceback, no table and no JSON."""
    out = tmp_path / "cli.json"
    done = CliRunner().invoke(evolve, ["check", "--layout", "appended", "--timeout-s", "0.001", "--json", str(out)])
    assert done.exit_code == 2 and not isinstance(done.exception, DistributedError), done.output
    assert done.output.startswith("Error: ") and "all processes of the group were stopped" in done.output
    assert "Traceback" not in done.output and "bitwise" not in done.output and not out.exists()


@pytest.mark.laya_claim("learner.check.report")
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_a_gpu_is_a_usage_error_naming_device():
    assert check_experiment("fixed-tail", "tiny", 3, 1, 2, "cpu") == \
        Experiment(layout=Layout("fixed-tail"), updates=3, microbatch=1, microbatches=2)  # the CPU is always there
    done = CliRunner().invoke(evolve, ["check", "--layout", "appended", "--device", "cuda"])
    assert done.exit_code == 2, done.output
    assert "Invalid value for --device: device cuda: torch" in done.output and "sees no CUDA device" in done.output


@pytest.mark.laya_claim("learner.check.report")
@pytest.mark.parametrize("option, field", [("--updates", "updates"), ("--microbatch", "microbatch"),
                                           ("--microbatches", "microbatches")])
@pytest.mark.parametrize("count", [0, -1])
def test_a_count_below_one_is_a_usage_error_not_an_empty_equal_check(option, field, count):
    """A check of no update compares nothing: it must not reach the arms (whose rows would all be
    equal) nor exit 1, the status of a bitwise difference."""
    done = CliRunner().invoke(evolve, ["check", "--layout", "appended", option, str(count)])
    assert done.exit_code == 2, done.output
    assert f"Invalid value for '{option}': {count} is not in the range x>=1" in done.output
    with pytest.raises(ValueError, match=f"Experiment.{field} must be at least 1, not {count}"):
        Experiment(**{field: count})
    assert Experiment(**{field: 1}).schedule()  # one is enough
