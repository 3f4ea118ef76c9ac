#!/usr/bin/env bash
# GPU probe, one prepared script for a machine with a CUDA GPU.
#  1. parent: the 1.7B-shaped parent (parent-1.7b): the first four training batches repeated
#     twice in each arm (8 Adam updates), both layouts; every update and the serialized
#     final tail must be bitwise equal (bench_evolution.py exits 1 otherwise);
#  2. seed: the seed-shaped configuration (seed-cpu) for the 4.7x comparison;
#  3. check: laya evolve check on CUDA, in-process and under torchrun, compared bitwise (tiny);
#  4. bench: the benchmark claims on CUDA, as a signed report (laya-qual run ... -k bench) that
#     must pass every bench.* claim (laya-qual verify --require-claim).
# Figures land as JSON/text under OUT (default reports/gpu-probe-<UTC time>); copy them
# into docs/benchmarks.md. parent-1.7b needs ~64 GB host RAM and ~10 GB disk.
# Usage: scripts/gpu-probe.sh [OUT]
# Environment:
#   LAYA_PYTHON         an interpreter that already has laya-qual and a CUDA torch (a machine
#                       with no network; docs/benchmarks.md); default: .venv, bootstrapped if missing
#   LAYA_PROBE_STAGES   which of "parent seed check bench" to run (default: all, in that order)
#   LAYA_PROBE_DEVICE   cuda (default), or cpu to try the script itself on a machine without a GPU
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-reports/gpu-probe-$(date -u +%Y%m%dT%H%M%SZ)}"
stages=" ${LAYA_PROBE_STAGES:-parent seed check bench} "
device="${LAYA_PROBE_DEVICE:-cuda}"
mkdir -p "$out"
if [ -z "${LAYA_PYTHON:-}" ] && [ ! -x .venv/bin/python ]; then scripts/bootstrap test; fi
py="${LAYA_PYTHON:-.venv/bin/python}"
laya() { "$py" -c 'import sys; from laya.cli import main; sys.argv[0] = "laya"; main()' "$@"; }
laya_qual() { "$py" -c 'import sys; from laya_qual.cli import main; sys.argv[0] = "laya-qual"; main()' "$@"; }
stage() { [[ "$stages" == *" $1 "* ]]; }
if [ "$device" = cuda ]; then
  $py -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else
          f"torch {torch.__version__} sees no CUDA device: install a CUDA build of torch for {sys.executable}")'
fi
export CUBLAS_WORKSPACE_CONFIG=:4096:8  # deterministic cuBLAS in every worker process
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  $py -c 'import laya, torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
          torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU", "| laya from", laya.__file__)'
  grep -m1 "model name" /proc/cpuinfo; echo "cores $(nproc); stages:$stages; device $device"
} | tee "$out/machine.txt"
run() {  # name, then bench_evolution.py arguments
  local name=$1; shift
  $py scripts/bench_evolution.py --device "$device" --json "$out/$name.json" "$@" | tee "$out/$name.txt"
}
for layout in appended fixed-tail; do
  if stage parent; then
    run "parent-1.7b-$layout" --config parent-1.7b --layout "$layout" --microbatch 4 --microbatches 4 --updates 8
  fi
  if stage seed; then run "seed-cpu-$layout" --config seed-cpu --layout "$layout" --profile; fi
done
# the check on CUDA, in-process and under torchrun (a GPU per rank and NCCL hand-offs when the
# machine has 3 GPUs, else all on cuda:0 with CPU copies): bitwise equal to each other
if stage check; then
  for layout in appended fixed-tail; do
    laya evolve check --layout "$layout" --device "$device" --json "$out/check-$layout.json" | tee "$out/check-$layout.txt"
    $py -m torch.distributed.run --standalone --nproc-per-node 3 -m laya.evolution.run check --layout "$layout" \
        --device "$device" --workdir "$out/torchrun-$layout" --json "$out/torchrun-$layout.json" \
        | tee "$out/torchrun-$layout.txt"
    $py -c 'import json, sys; a, b = (json.load(open(f)) for f in sys.argv[1:])
same = a["rows"] == b["rows"] and a["state_digests"] == b["state_digests"]
print("torchrun bitwise equal to laya evolve check:", same, "| hand-offs:", a["handoff_device"], b["handoff_device"])
sys.exit(0 if same else 1)' "$out/check-$layout.json" "$out/torchrun-$layout.json" | tee -a "$out/torchrun-$layout.txt"
  done
fi
if stage bench; then
  bundle="$out/bench.intoto.jsonl"
  rc=0
  laya_qual run -n 0 --out "$bundle" -- --laya-device "$device" -k bench 2>&1 | tee "$out/report.txt" || rc=$?
  # -k bench leaves every other claim not evaluated, so a good run is WARNED (exit 3), never
  # PASSED; what must hold is that the signed report passes every bench.* claim.
  [ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || exit "$rc"
  pub=$($py -c 'import os; from laya_qual.report.signing import KEY_ENV, dev_key_path, public_key_path
print(public_key_path(os.environ.get(KEY_ENV) or str(dev_key_path())))')
  required=$(laya_qual claims --json | $py -c 'import json, sys
print(" ".join("--require-claim " + c["id"] for c in json.load(sys.stdin) if c["id"].startswith("bench.")))')
  laya_qual verify "$bundle" --public-key "$pub" $required | tee -a "$out/report.txt"
fi
echo "figures in $out"
