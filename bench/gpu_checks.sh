#!/usr/bin/env bash
# Issue 33's checks on a GPU machine, in one go (each step bounded, its log kept, the next step runs whatever happened):
#   bash ../shared/gpu/prepare --calib     # on the CPU machine, once
#   bash .carry/on-device bash bench/gpu_checks.sh "$OUT"     # on the GPU machine (the device tool's run)
# 1. the CUDA tests, 2. bench/gpu_lane.py (probes, build, three evaluations, ratios), 3. bench/archive/gpu_lane/aoti_cuda_probe.py
# (where a CUDA AOTInductor package dies; off unless AOTI_S is set).
set -u
out=${1:-/tmp/gpu-checks}
mkdir -p "$out"
step() {  # step NAME SECONDS COMMAND...: its output in $out/NAME.log, its exit status and time at the end (0 s: skip)
  local name=$1 limit=$2; shift 2
  [ "$limit" -gt 0 ] || { echo "$name: skipped"; return; }
  local started=$SECONDS
  timeout -k 10 "$limit" "$@" > "$out/$name.log" 2>&1
  echo "exit $? after $((SECONDS - started)) s" >> "$out/$name.log"
  tail -n 1 "$out/$name.log" | sed "s/^/$name: /"
}
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
step pytest "${PYTEST_S:-150}" python3 -m pytest -v -rs --durations=0 -p no:cacheprovider tests/runtime/runners/test_cuda_graph.py \
  tests/evaluation/measuring/test_measure.py -k "cuda or captured or gpu or streams"
step gpu_lane "${LANE_S:-300}" python3 -m bench.gpu_lane --assets ../shared/assets --save "$out" \
  --targets "${LANE_TARGETS:-}"
for r in report report-throughput report-auto_again; do mkdir -p "$out/$r" && cp /tmp/gpu-lane/$r/{results.json,matrix.md} "$out/$r/" 2>/dev/null; done
step aoti "${AOTI_S:-0}" python3 -m bench.archive.gpu_lane.aoti_cuda_probe --assets ../shared/assets --save "$out" ${AOTI_DYNAMIC:+--dynamic}
true
