"""learner.torchrun: the ranks of the torchrun entry (`python -m laya.evolution.run check`) run the
check's jobs as the in-process Group does, and every refusal of docs/evolution.md, "Launching with
torchrun", names its cause on every rank.

A real torchrun costs 10-15 s on the shared 2-core machine (four interpreters importing torch;
measured for one update of the tiny config), so the suite runs one (two updates, appended,
its rows against the in-process Group's), runs run.py's own code where it is cheap, and
tests/evolution/test_torchrun.py runs the full checks of both layouts:

- the check itself (`run._check` on `run.Ranks`) as each launched rank runs it once it has
  joined its gloo group, on the three ranks of the session's group (a gloo group of world 3,
  the state `init_process_group` leaves a torchrun rank in). Oracle: `run_arms` on the Group
  itself, the path docs/evolution.md says the launcher reproduces: every rank must get its rows,
  floats equal;
- the launch refusals through a real `python -m laya.evolution.run check` (one interpreter).

Each rank returns its outcome, error included, as a value, so a refusal that every rank raises
leaves the session's group up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from laya.errors import DistributedError, LayaError
from laya.evolution import run
from laya.evolution.check import run_arms
from laya.evolution.workspace import Experiment, prepare

EXP = Experiment(updates=2, microbatches=2, microbatch=1)
TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
COMPARED = ("update", "microbatch", "kernel_loss", "learner_loss", "kernel_grad_norm", "learner_grad_norm", "equal")


def launched(rank: int, exp, workdir: Path, cwd: dict | None = None, job=None) -> dict:
    """What one launched rank does after joining its group: the check on its `Ranks` (or `job` run
    on all ranks through them); with `cwd`, each rank works in its own directory first."""
    here = os.getcwd()
    if cwd is not None:
        os.chdir(cwd[rank])
    try:
        if job is not None:
            return {"result": run.Ranks(rank).run(job, exp, workdir)}
        result, _ = run._check(run.Ranks(rank), exp, workdir)
        return {"rows": [[row[f] for f in COMPARED] for row in result.rows], "equal": result.equal}
    except DistributedError as e:
        return {"error": str(e), "phase": e.phase, "ranks": e.ranks}
    finally:
        os.chdir(here)


@pytest.fixture(scope="module")
def reference(evolution_group, tmp_path_factory):
    """The rows of run_arms on the in-process Group, the path the launcher reproduces."""
    result = run_arms(evolution_group, prepare(EXP, tmp_path_factory.mktemp("reference")))
    rows = [[row[f] for f in COMPARED] for row in result.rows]
    assert result.equal and len(rows) == EXP.updates
    return rows


@pytest.mark.laya_claim("learner.torchrun")
def test_every_rank_gets_the_rows_of_the_in_process_group(evolution_group, reference, tmp_path):
    outcomes = evolution_group.run(launched, EXP, tmp_path / "launched")
    assert outcomes == [{"rows": reference, "equal": True}] * 3  # the same floats, on every rank
    left = tmp_path / "launched"  # the workspace stays in --workdir, packets audited by rank 0
    assert (left / "parent.safetensors").is_file()
    assert sorted(p.name for p in (left / "packets").iterdir()) == ["mb-0000", "mb-0001"]
    assert all((p / "certificate.json").is_file() for p in (left / "packets").iterdir())


@pytest.mark.laya_claim("learner.torchrun")
def test_a_real_torchrun_reports_the_rows_of_the_in_process_group(reference, tmp_path):
    """One real `torchrun --standalone --nproc-per-node 3 -m laya.evolution.run check` (about 15 s):
    exit 0, the learner rank's table on stdout and its --json rows those of the in-process Group."""
    figures = tmp_path / "figures.json"
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "3",
                           "-m", "laya.evolution.run", "check", "--layout", EXP.layout.name, "--updates",
                           str(EXP.updates), "--microbatches", str(EXP.microbatches), "--microbatch",
                           str(EXP.microbatch), "--workdir", str(tmp_path / "ws"), "--json", str(figures),
                           "--timeout-s", "300"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("  yes") == EXP.updates and "learner 114176 bytes < parent 217856 bytes" in done.stdout
    launched_figures = json.loads(figures.read_text())
    assert launched_figures["equal"] is True
    assert [[row[f] for f in COMPARED] for row in launched_figures["rows"]] == reference  # JSON keeps floats exact


@pytest.mark.laya_claim("learner.torchrun")
def test_a_workdir_that_is_not_empty_is_refused_on_every_rank(evolution_group, tmp_path):
    workdir = tmp_path / "used"
    workdir.mkdir()
    (workdir / "earlier").write_text("a previous check")
    said = (f"rank 0 raised LayaError: --workdir {workdir} is not empty "
            "(each check needs a fresh workspace)")
    phase = "laya.evolution.run._prepare on ranks [0]"
    assert evolution_group.run(launched, EXP, workdir) == \
        [{"error": f"{phase}: {said}", "phase": phase, "ranks": (0,)}] * 3  # prepared on rank 0, named on all
    every = "laya.evolution.run._prepare on ranks [0, 1, 2]"  # a job on all ranks: each names itself
    assert evolution_group.run(launched, EXP, workdir, None, run._prepare) == \
        [{"error": f"{every}: {said.replace('rank 0', f'rank {r}')}", "phase": every, "ranks": (r,)}
         for r in range(3)]
    assert [p.name for p in workdir.iterdir()] == ["earlier"]  # nothing written


@pytest.mark.laya_claim("learner.torchrun")
def test_a_workdir_that_is_not_shared_names_each_blind_rank(evolution_group, tmp_path):
    """The same path, other files on each rank: /proc/self/cwd/ws is each process's own directory,
    as an unshared --workdir is each node's own disk. Rank 1 finds no parent there, rank 2 another."""
    cwd = {r: tmp_path / f"node{r}" for r in range(3)}
    for directory in cwd.values():
        directory.mkdir()
    (cwd[2] / "ws").mkdir()
    (cwd[2] / "ws" / "parent.safetensors").write_bytes(b"another parent")
    parent = "/proc/self/cwd/ws/parent.safetensors"
    expected = {"error": f"workspace: rank 1 cannot read {parent}: No such file or directory; rank 2 reads "
                         f"another file at {parent} (--workdir must be shared storage, mounted at the same "
                         "path on every node)", "phase": "workspace", "ranks": (1, 2)}
    assert evolution_group.run(launched, EXP, Path("/proc/self/cwd/ws"), cwd) == [expected] * 3
    assert (cwd[0] / "ws" / "parent.safetensors").is_file() and not (cwd[0] / "ws" / "packets").exists()


@pytest.mark.laya_claim("learner.torchrun")
@pytest.mark.parametrize("env, says", [
    ({}, "environment RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT not set: start this module with torchrun"),
    ({"RANK": "0", "WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1"}, "environment MASTER_PORT not set"),
    ({"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"},
     "WORLD_SIZE is 2; the check needs exactly 3 ranks"),
    ({"RANK": "2", "WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}, None),
], ids=["no-torchrun", "no-port", "world-2", "rank-2-of-3"])
def test_only_a_torchrun_start_of_three_ranks_is_taken(monkeypatch, env, says):
    for name in TORCHRUN_ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if says is None:
        assert run._launched_rank() == 2
        return
    with pytest.raises(LayaError, match=says.replace("(", r"\(")):
        run._launched_rank()


@pytest.mark.laya_claim("learner.torchrun")
def test_a_launch_of_four_ranks_exits_2_before_any_work(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_ENV}
    env |= {"RANK": "3", "WORLD_SIZE": "4", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}
    done = subprocess.run([sys.executable, "-m", "laya.evolution.run", "check", "--layout", "appended",
                           "--workdir", str(tmp_path / "ws")], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("laya.evolution.run: launch: WORLD_SIZE is 4; the check needs exactly 3 "
                                  "ranks"), done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "ws").exists()


@pytest.mark.laya_claim("learner.torchrun")
@pytest.mark.parametrize("option, value, says", [
    ("--updates", "0", "Invalid value for '--updates': 0 is not in the range x>=1"),
    ("--timeout-s", "0", "Invalid value for '--timeout-s': 0.0 is not in the range x>0"),
])
def test_a_count_or_timeout_out_of_range_is_a_usage_error_before_the_launch(monkeypatch, option, value, says):
    """Refused by the launcher's own options, before it looks for torchrun's variables."""
    from click.testing import CliRunner

    for name in TORCHRUN_ENV:
        monkeypatch.delenv(name, raising=False)
    done = CliRunner().invoke(run.main, ["check", "--layout", "appended", "--workdir", "ws", option, value])
    assert done.exit_code == 2 and says in done.output, done.output


@pytest.mark.laya_claim("learner.torchrun")
def test_the_launcher_takes_the_options_of_laya_evolve_check_and_its_own():
    """docs/evolution.md: the options of `laya evolve check` with their defaults, plus --workdir
    (required) and --timeout-s (1800 s)."""
    from laya.evolution.cli import evolve

    def options(command) -> dict:
        return {p.name: (p.default, p.required) for p in command.params}

    launcher, check = options(run.main.commands["check"]), options(evolve.commands["check"])
    workdir = launcher.pop("workdir")
    assert workdir[1] is True and launcher == check, (launcher, check)
    assert launcher["timeout_s"] == (1800.0, False)


@pytest.mark.laya_claim("learner.torchrun")
def test_a_rank_leaves_with_its_status_once_its_output_and_exit_handlers_are_done():
    """A rank ends with os._exit (docs/evolution.md): its exit handlers run first, and what it
    printed to a pipe (block-buffered) is written out, the learner rank's table included."""
    probe = ("import atexit, sys\nfrom laya.evolution.run import _leave\n"
             "atexit.register(lambda: print('exit handler ran'))\n"
             "print('the report')\nprint('a warning', file=sys.stderr)\n_leave(3)\n")
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # as a rank's stdout usually is
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=buffered)
    assert (done.returncode, done.stdout, done.stderr) == (3, "the report\nexit handler ran\n", "a warning\n")
