#!/usr/bin/env bash
# Run ON the GPU machine from the repository root, with .device/ carried (binaries in
# .device/bin: ws1check, test_gpu; Debian libraries in .device/debs; ../shared/device/README.md).
#   bash tools/device/h200_run.sh STEP...     STEP: env suite suite-real sanitizer evidence bench
# Logs and artifacts go to $OUT (default /tmp/ws1-out). Each step's exit status is printed in
# the summary at the end; the script's status is the first failing step's.
set -u
OUT=${OUT:-/tmp/ws1-out}
mkdir -p "$OUT"
source .device/unpack-deps.sh .device/debs >/dev/null
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/cuda/lib64
export WS1CHECK_DATA_DIR=$PWD
BIN=.device/bin
REAL=fixtures/ws1-qwen3-8b-dense.json
summary=()
status=0

step() {  # step NAME COMMAND...: runs it, logs to $OUT/NAME.log, records the status
  local name=$1; shift
  local t0=$SECONDS
  "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  summary+=("$name rc=$rc $((SECONDS - t0))s")
  [ $rc -ne 0 ] && [ $status -eq 0 ] && status=$rc
  tail -n 5 "$OUT/$name.log"
}

for s in "$@"; do
  case $s in
    env) step env $BIN/ws1check env ;;
    suite) step suite env WS1_GPU_WORKLOAD=ws1-smoke $BIN/test_gpu ;;
    suite-real) step suite-real env WS1_GPU_WORKLOAD=ws1-qwen3-8b-dense $BIN/test_gpu ;;
    sanitizer)
      step memcheck env WS1_GPU_WORKLOAD=ws1-smoke /usr/local/cuda/bin/compute-sanitizer --tool memcheck \
        --error-exitcode 9 $BIN/test_gpu "[accuracy]"
      step racecheck env WS1_GPU_WORKLOAD=ws1-smoke /usr/local/cuda/bin/compute-sanitizer --tool racecheck \
        --error-exitcode 9 $BIN/test_gpu "[accuracy]" ;;
    evidence)
      step accuracy $BIN/ws1check accuracy --op all --direction both --tier all --backend cuda_bf16 \
        --workload $REAL --out "$OUT"
      step invariance $BIN/ws1check invariance --op all --transform all --direction both \
        --backend cuda_bf16 --workload $REAL --out "$OUT" ;;
    bench) step bench $BIN/ws1check bench --op all --out "$OUT" ;;
    *) echo "unknown step $s"; exit 2 ;;
  esac
done
printf '%s\n' "${summary[@]}"
exit $status
