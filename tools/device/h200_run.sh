#!/usr/bin/env bash
# Run ON the GPU machine from the repository root, with .device/ carried (binaries in
# .device/bin: ws1check, test_gpu; Debian libraries in .device/debs; ../shared/device/README.md).
#   bash tools/device/h200_run.sh STEP...
#   STEP: env suite suite-real determinism-real sanitizer evidence bench parity-manifest
#         parity-sweep parity-kv triton-smoke triton-evidence audit gate-smoke gate-real
#         bench-det-gemm reference reference-real evidence-gpuref triton-accuracy-real judge
#         gate-real-bg bg bg-wait evidence-8k suite-8k acc-ops gemm-peers det-gemm attention-probe peers
# evidence-8k runs accuracy (golds from cuda_fp32) and invariance on the 8192-token workload
# (fixtures/ws1-bench-8k.json), one op per run so that each finished op leaves its evidence
# (EVIDENCE_8K_TIMEOUT s for all of it, default 540; OPS names a subset), packed into
# $OUT/evidence-8k.tgz;
# suite-8k runs the gpu suite's accuracy and invariance tests on it.
# SUITE_FILTER narrows suite to Catch2 tags (e.g. "[linear_logp],[accuracy]"; passed quoted, and a
# filter that matches no test fails the step); BENCH_OPS names
# the ops bench times (one run each, into $OUT/bench-OP/; default all).
# gemm-peers times det_gemm's Triton module against cuBLAS and a plain Triton GEMM at the
# Qwen3-8B projection shapes, with its bitwise checks (tools/bench/gemm_peers.py), into
# $OUT/gemm-peers.json; det-gemm runs `bench --op det_gemm` and gemm-peers in the same call, then
# det_gemm's accuracy (golds from cuda_fp32; on the Qwen3-8B workload and at 8192 tokens) and
# invariance on cuda_bf16 and triton_cuda_bf16, packed with the logs into $OUT/det-gemm.tgz
# (beside it: bench-cuda_bf16.json, gemm-peers.json and det-gemm.log, all the steps' logs).
# peers times attention's peers (cuDNN and flash SDPA, flash_attn, flex_attention:
# tools/bench/peers.py) into $OUT/peers.json, then `bench --op attention --peers` against that
# file in the same call (bench-cuda_bf16.json: each row's x_peer).
# gate-real-bg starts gate-real in its own process session (it outlives the call while the
# machine stays warm), from a copy of the binaries, logging to /tmp/ws1-bg; bg does the same for
# the steps named in BG_STEPS (their environment passes through); bg-wait waits for either
# (BG_WAIT s, default 540) and copies its logs and artifacts to $OUT.
# The parity steps run synthetic:qwen3-8b (36 layers, real dims) on PARITY_BACKEND (default
# cuda_bf16) in both rms_norm
# orders (PARITY_ORDERS="kernel" or "hf" for one; PARITY_TIMEOUT bounds each run, s); their
# artifacts are packed into $OUT/parity-<step>.tgz (few files come back).
# PARITY_ROLLOUT_ORDER=hf (or kernel) runs rhs in that order (parity --rollout-rms-norm-order: two
# paths that are not bit-identical); PARITY_STRICT= (empty) drops --strict.
# REFERENCE=cuda_fp32 takes the accuracy steps' golds from the GPU reference engine.
# Logs and artifacts go to $OUT (default /tmp/ws1-out). Each step's exit status is printed in
# the summary at the end; the script's status is the first failing step's.
set -u
OUT=${OUT:-/tmp/ws1-out}
mkdir -p "$OUT"
source .device/unpack-deps.sh .device/debs >/dev/null
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/cuda/lib64
export WS1CHECK_DATA_DIR=$PWD
BIN=${BIN:-.device/bin}
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
    suite) step suite env WS1_GPU_WORKLOAD=ws1-smoke $BIN/test_gpu --warn NoTests ${SUITE_FILTER:+"$SUITE_FILTER"} ;;
    suite-real) step suite-real env WS1_GPU_WORKLOAD=ws1-qwen3-8b-dense $BIN/test_gpu ;;
    determinism-real) step determinism-real env WS1_GPU_WORKLOAD=ws1-qwen3-8b-dense $BIN/test_gpu "[determinism]" ;;
    triton-accuracy-real)
      step triton-accuracy-real $BIN/ws1check accuracy --op all --direction both --tier all \
        --backend triton_cuda_bf16 ${REFERENCE:+--reference $REFERENCE} --workload $REAL --out "$OUT/triton-real" ;;
    triton-smoke|triton-evidence)
      W=fixtures/ws1-smoke.json
      [ $s = triton-evidence ] && W=$REAL
      step $s-accuracy $BIN/ws1check accuracy --op all --direction both --tier all --backend triton_cuda_bf16 \
        ${REFERENCE:+--reference $REFERENCE} --workload $W --out "$OUT/$s"
      step $s-invariance $BIN/ws1check invariance --op all --transform all --direction both \
        --backend triton_cuda_bf16 --workload $W --out "$OUT/$s"
      tar czf "$OUT/$s.tgz" -C "$OUT" $s && rm -rf "$OUT/$s" ;;
    sanitizer)
      # SANITIZER_TIMEOUT (s, default 240) bounds each tool: rc 124 in the summary = cut short.
      # SANITIZER_FILTER picks the gpu tests run under it (default "[accuracy]"; e.g. "[det_gemm]").
      for tool in memcheck racecheck; do
        step $tool timeout ${SANITIZER_TIMEOUT:-240} env WS1_GPU_WORKLOAD=ws1-smoke \
          /usr/local/cuda/bin/compute-sanitizer --tool $tool --error-exitcode 9 $BIN/test_gpu "${SANITIZER_FILTER:-[accuracy]}"
      done ;;
    evidence)
      step accuracy $BIN/ws1check accuracy --op all --direction both --tier all --backend cuda_bf16 \
        ${REFERENCE:+--reference $REFERENCE} --workload $REAL --out "$OUT"
      step invariance $BIN/ws1check invariance --op all --transform all --direction both \
        --backend cuda_bf16 --workload $REAL --out "$OUT" ;;
    bench)  # BENCH_OPS: ops timed one after the other (default all), each into $OUT/bench-OP/
      for op in ${BENCH_OPS:-all}; do step bench-$op $BIN/ws1check bench --op $op --out "$OUT/bench-$op"; done ;;
    bench-det-gemm) step bench-det-gemm $BIN/ws1check bench --op det_gemm --out "$OUT" ;;
    gemm-peers) step gemm-peers python3 tools/bench/gemm_peers.py --out "$OUT/gemm-peers.json" ;;
    attention-probe)
      # tools/device/attention_probe.cu built into $BIN (nvcc line in its header): accuracy of
      # sampled rows, bits across runs, schedules and decode / chunked rows, the variants' timings,
      # and REPEATS (default 100) launches compared bit for bit.
      step probe-check timeout 120 $BIN/attention_probe check
      step probe-time timeout 90 $BIN/attention_probe time
      step probe-repeat timeout 60 $BIN/attention_probe repeat ${REPEATS:-100} ;;
    peers)
      # Back to back on one machine: a ratio to a peer holds for one GPU and one run.
      step peers-py python3 tools/bench/peers.py --out "$OUT/peers.json"
      step peers-bench $BIN/ws1check bench --op attention --peers "$OUT/peers.json" --out "$OUT" ;;
    det-gemm)
      # The two timings first and back to back (one machine, one call), then the judgments.
      step dg-bench $BIN/ws1check bench --op det_gemm --out "$OUT"
      step dg-gemm-peers python3 tools/bench/gemm_peers.py --out "$OUT/gemm-peers.json"
      dirs=()
      for B in cuda_bf16 triton_cuda_bf16; do
        step dg-accuracy-$B $BIN/ws1check accuracy --op det_gemm --direction both --tier all --backend $B \
          --reference cuda_fp32 --workload $REAL --out "$OUT/dg-$B"
        step dg-invariance-$B $BIN/ws1check invariance --op det_gemm --transform all --direction both \
          --backend $B --workload $REAL --out "$OUT/dg-$B"
        step dg-accuracy-8k-$B $BIN/ws1check accuracy --op det_gemm --direction both --tier all --backend $B \
          --reference cuda_fp32 --workload fixtures/ws1-bench-8k.json --out "$OUT/dg-$B-8k"
        for d in dg-$B dg-$B-8k; do [ -e "$OUT/$d" ] && dirs+=($d); done
      done
      mkdir -p "$OUT/dg-logs" && cat "$OUT"/dg-*.log > "$OUT/det-gemm.log" 2>/dev/null && mv "$OUT"/dg-*.log "$OUT/dg-logs"/
      cp "$OUT/bench-cuda_bf16.json" "$OUT/gemm-peers.json" "$OUT/dg-logs"/ 2>/dev/null
      tar czf "$OUT/det-gemm.tgz" -C "$OUT" "${dirs[@]}" dg-logs && rm -rf "${dirs[@]/#/$OUT/}" "$OUT/dg-logs" ;;
    evidence-8k)
      E=/tmp/ws1-evidence-8k; mkdir -p $E; t0=$SECONDS
      OPS=${OPS:-embedding rms_norm qk_norm det_gemm rope attention silu swiglu lm_head logp batch_invariant_logp pack linear_logp}
      for op in $OPS; do
        left=$(( ${EVIDENCE_8K_TIMEOUT:-540} - (SECONDS - t0) )); [ $left -le 5 ] && break
        step acc8k-$op timeout $left $BIN/ws1check -v accuracy --op $op --direction both --tier all --backend cuda_bf16 \
          --reference cuda_fp32 --workload fixtures/ws1-bench-8k.json --out $E/accuracy-$op
      done
      for op in $OPS; do
        left=$(( ${EVIDENCE_8K_TIMEOUT:-540} - (SECONDS - t0) )); [ $left -le 5 ] && break
        step inv8k-$op timeout $left $BIN/ws1check invariance --op $op --transform all --direction both --backend cuda_bf16 \
          --workload fixtures/ws1-bench-8k.json --out $E/invariance-$op
      done
      cat $OUT/acc8k-*.log $OUT/inv8k-*.log > $OUT/evidence-8k.log 2>/dev/null; rm -f $OUT/acc8k-*.log $OUT/inv8k-*.log
      tar czf "$OUT/evidence-8k.tgz" -C $E . ;;
    acc-ops)
      # Accuracy (golds from cuda_fp32) and invariance of the ops in OPS on the Qwen3-8B workload
      # and at 8192 tokens, one artifact per op, workload and judgment, packed into $OUT/acc-ops.tgz:
      # to compare a kernel change's records with committed evidence.
      A=/tmp/ws1-acc-ops; mkdir -p $A
      for op in ${OPS:?acc-ops needs OPS}; do
        for w in $REAL fixtures/ws1-bench-8k.json; do
          tag=$(basename $w .json)
          step acc-$op-$tag $BIN/ws1check accuracy --op $op --direction both --tier all --backend cuda_bf16 \
            --reference cuda_fp32 --workload $w --out $A/accuracy-$op-$tag
          step inv-$op-$tag $BIN/ws1check invariance --op $op --transform all --direction both --backend cuda_bf16 \
            --workload $w --out $A/invariance-$op-$tag
        done
      done
      cat $OUT/acc-*.log $OUT/inv-*.log > $OUT/acc-ops.log 2>/dev/null; rm -f $OUT/acc-*-*.log $OUT/inv-*-*.log
      tar czf "$OUT/acc-ops.tgz" -C $A . ;;
    suite-8k) step suite-8k env WS1_GPU_WORKLOAD=ws1-bench-8k WS1_GPU_REFERENCE=cuda_fp32 $BIN/test_gpu "[accuracy],[invariance]" ;;
    judge) step judge env WS1_GPU_WORKLOAD=ws1-smoke $BIN/test_gpu "[judge]" ;;
    gate-real-bg|bg)
      # Runs BG_STEPS (gate-real for gate-real-bg) in its own process session from a copy of the
      # binaries, so that it outlives this call while the machine stays warm.
      [ $s = gate-real-bg ] && BG_STEPS=gate-real && export REFERENCE=${REFERENCE:-cuda_fp32}
      mkdir -p /tmp/ws1-bg/bin && cp $BIN/* /tmp/ws1-bg/bin/ && rm -f /tmp/ws1-bg/done
      OUT=/tmp/ws1-bg BIN=/tmp/ws1-bg/bin BG_STEPS=$BG_STEPS setsid bash -c \
        'bash tools/device/h200_run.sh $BG_STEPS; echo $? > /tmp/ws1-bg/done' >/tmp/ws1-bg/driver.log 2>&1 </dev/null &
      summary+=("$s started: $BG_STEPS") ;;
    bg-wait)
      t0=$SECONDS
      while [ ! -f /tmp/ws1-bg/done ] && [ $((SECONDS - t0)) -lt ${BG_WAIT:-540} ]; do sleep 5; done
      cp /tmp/ws1-bg/*.log /tmp/ws1-bg/*.tgz "$OUT"/ 2>/dev/null
      summary+=("bg-wait: $( [ -f /tmp/ws1-bg/done ] && echo "done rc=$(cat /tmp/ws1-bg/done)" || echo running) after $((SECONDS - t0))s") ;;
    reference|reference-real)
      # The cuda_fp32 golds against the CPU ones (and, where they differ beyond the float32 row,
      # both against float64); reference-real at the Qwen3-8B widths (V = 151936).
      W=ws1-smoke
      [ $s = reference-real ] && W=ws1-qwen3-8b-dense
      step $s env WS1_GPU_WORKLOAD=$W $BIN/test_gpu "[reference]" ;;
    evidence-gpuref)
      # The real-width accuracy run with the golds from the cuda_fp32 engine (the ops it computes on
      # the device; the rest on the host); each cell records its engine.
      step accuracy-gpuref $BIN/ws1check -v accuracy --op all --direction both --tier all --backend cuda_bf16 \
        --reference cuda_fp32 --workload $REAL --out "$OUT/gpuref" ;;
    parity-kv) step parity-kv $BIN/ws1check parity --fixture kv --backend cuda_bf16 --strict --out "$OUT" ;;
    audit) step audit $BIN/ws1check audit ;;
    gate-smoke|gate-real)
      W=fixtures/ws1-smoke.json
      [ $s = gate-real ] && W=$REAL
      # GATE_FLAGS: more gate options, e.g. --overlap-backends.
      step $s $BIN/ws1check gate --backends cuda_bf16,triton_cuda_bf16 ${REFERENCE:+--reference $REFERENCE} \
        --workload $W --out /tmp/ws1-$s -q ${GATE_FLAGS:-}
      tar czf "$OUT/$s.tgz" -C /tmp ws1-$s ;;
    parity-manifest|parity-sweep)
      P=/tmp/ws1-parity/$s
      mkdir -p $P
      for order in ${PARITY_ORDERS:-kernel hf}; do
        if [ $s = parity-manifest ]; then
          step $s-$order timeout ${PARITY_TIMEOUT:-600} $BIN/ws1check parity --model synthetic:qwen3-8b --backend ${PARITY_BACKEND:-cuda_bf16} --strict \
            --rms-norm-order $order --out $P/$order
        else
          # 3 seeds x prompts {8, 32} x responses {40, 44} x logit scales {1, 4}: 24 sequences,
          # 1008 active tokens sampled by the chain itself; the FP32 reference chain is CPU-bound
          # at these dims, so the sweep reports the candidate's d only. SWEEP_SEEDS, SWEEP_PROMPTS,
          # SWEEP_RESPONSES and SWEEP_SCALES narrow it (a backend whose decode step is slow).
          step $s-$order timeout ${PARITY_TIMEOUT:-600} $BIN/ws1check parity --model synthetic:qwen3-8b --backend ${PARITY_BACKEND:-cuda_bf16} \
            --fixture sweep --seeds ${SWEEP_SEEDS:-1,2,3} --prompt-len ${SWEEP_PROMPTS:-8,32} \
            --response-len ${SWEEP_RESPONSES:-40,44} --logit-scales ${SWEEP_SCALES:-1,4} \
            --sequences 1 ${PARITY_STRICT---strict} --no-reference --rms-norm-order $order \
            ${PARITY_ROLLOUT_ORDER:+--rollout-rms-norm-order $PARITY_ROLLOUT_ORDER} --out $P/$order
        fi
      done
      tar czf "$OUT/$s.tgz" -C $P . ;;
    *) echo "unknown step $s"; exit 2 ;;
  esac
done
printf '%s\n' "${summary[@]}"
exit $status
