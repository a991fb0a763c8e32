#!/usr/bin/env bash
# scripts/gpu quick without a GPU: a stand-in nvidia-smi, and in place of
# each stage a command that succeeds, exits 2, prints an out-of-memory
# error, crashes or hangs, or bench/gpu's own processes on the CPU with
# levers that crash and run out of memory on purpose, or bench/finetune on
# the CPU with a stand-in for its Hugging Face peer that checks the plan it
# is given. Every stage's log and
# the summary must come back in $OUT with each stage's outcome, and a
# budget spent skips the stages left, and PBERT_GPU_STAGES runs only the
# stages it names.
#
#   bash tests/scripts/gpu_dry_run.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$(cd "${1:?usage: gpu_dry_run.sh BUILD_DIR}" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() {
  echo "gpu_dry_run: $1" >&2
  exit 1
}

mkdir -p "$scratch/bin" "$scratch/out" "$scratch/deps"
cat >"$scratch/bin/nvidia-smi" <<'SMI'
#!/bin/sh
case "$*" in
  -L) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-stand-in)" ;;
  *) echo "NVIDIA H100 80GB HBM3" ;;
esac
SMI
chmod +x "$scratch/bin/nvidia-smi"
# The peer's stand-in: the plan must be the padded case's steps of SQuAD-384
# (the warm-up's and the timed ones, each of micro_rows sequences of at
# most 384 tokens); it says it took half a second for the timed ones.
cat >"$scratch/peer.py" <<'PEER'
import json, sys
plan = json.load(open(sys.argv[1]))
steps, warmup = plan["steps"], plan["warmup"]
problems = [what for what, bad in (
    ("task", plan["task"] != "squad"), ("max_len", plan["max_len"] != 384),
    ("device", plan["device"] != "cpu"), ("steps", len(steps) != 2 * warmup),
    ("lengths", any(len(s) != plan["micro_rows"] or not all(1 <= n <= 384 for n in s)
                    for s in steps))) if bad]
if problems:
    sys.exit("the plan's %s are not as bench/finetune must write them" % ", ".join(problems))
timed = steps[warmup:]
print(json.dumps({"seconds": 0.5, "tokens": sum(map(sum, timed)), "sequences": sum(map(len, timed)),
                  "peak_bytes": 0, "torch": "stand-in", "model": "BertForQuestionAnswering"}))
PEER

status=0
env PATH="$scratch/bin:$PATH" OUT="$scratch/out" PBERT_GPU_RESULTS="$scratch/results" \
  PBERT_GPU_STAGE_MACHINE='echo "[key] a stand-in H100"' \
  PBERT_GPU_STAGE_BUILD='echo "compiling"; echo "[key] nothing built"; exit 2' \
  PBERT_GPU_STAGE_CUDA_TESTS='echo "[ RUN      ] CudaTest.Big"; echo "c10::OutOfMemoryError: CUDA out of memory. Tried to allocate 80.00 GiB"; exit 1' \
  PBERT_GPU_STAGE_KERNELS='echo "[key] 8 kernels, largest difference from the twins 1.2e-07"' \
  PBERT_GPU_STAGE_LEVERS="'$build/bench/gpu' --device cpu --models tiny --levers 0,1,2,3 --alone 1 --rows 2 --steps 1 --warmup 1 --turns 1 --fail 1:crash --fail 2:oom --case-timeout 30" \
  PBERT_GPU_STAGE_PROFILES='echo "profiling"; kill -SEGV $$' \
  PBERT_GPU_STAGE_SANITIZER='echo "waiting"; sleep 600' PBERT_GPU_LIMIT_SANITIZER=2 \
  PBERT_GPU_STAGE_ALONE='echo "[key] large 123 real tokens/s"' \
  PBERT_GPU_STAGE_FINETUNE="'$build/bench/finetune' --model tiny --tasks squad-384 --sequences 8 --rounds 1 --steps 2 --threads 1 --features 256 --peer 'python3 $scratch/peer.py' --plan-out '$scratch/plan.json'" \
  bash scripts/gpu quick "$scratch/deps" >"$scratch/run.log" 2>&1 || status=$?
cat "$scratch/run.log"
((status == 1)) || fail "scripts/gpu quick exited with $status, not 1 (a stage failed)"
summary=$scratch/out/summary.md
[ -f "$summary" ] || fail "no summary.md in \$OUT"
expect() {  # expect STAGE PATTERN: the stage's row of the summary matches
  grep -E "^\| $1 \| $2" "$summary" >/dev/null || fail "the row of $1 is not '$2': $(grep "^| $1 " "$summary")"
  [ -s "$scratch/out/$1.log" ] || fail "no $1.log in \$OUT"
}
expect machine 'ok \| [0-9]+ \| a stand-in H100 \|'
expect build 'failed \(exit 2\) \| [0-9]+ \| nothing built \|'
expect cuda-tests 'out of memory \(exit 1\)'
expect kernels 'ok \| [0-9]+ \| 8 kernels, largest difference from the twins 1.2e-07 \|'
# The levers: bench/gpu went on past a crashed and an out-of-memory lever,
# printed its tables and its key figure, and said why each was left out.
expect levers 'failed \(exit 1\) \| [0-9]+ \| tiny [0-9,]+ real tokens/s'
grep -q '"+ fused LAMB" at 2 rows is left out, it failed: crashed (signal 6' "$scratch/out/levers.log" ||
  fail "bench/gpu did not say that the crashed lever was left out"
grep -q '"+ vocabulary padded to 64" at 2 rows is left out, it failed: out of memory' \
  "$scratch/out/levers.log" || fail "bench/gpu did not say that a lever ran out of memory"
grep -q '^| tiny | + one QKV product | ' "$scratch/out/levers.log" ||
  fail "bench/gpu did not measure the levers after the failed ones"
# Each lever alone (--alone 1): the fused LAMB alone ran although the fused
# LAMB added up crashed on purpose, beside the first lever.
grep -qE '^\| tiny \| fused LAMB alone \| [0-9]+ \| [0-9.]+ \|$' "$scratch/out/levers.log" ||
  fail "bench/gpu printed no row of the fused LAMB alone against the first lever"
expect profiles 'crashed \(signal 11, SEGV\)'
expect sanitizer 'timed out \(2 s\)'
# Fine-tuning: bench/finetune's cases, then its peer's row on the same
# sequences and the ratio to it.
expect finetune "ok \| [0-9]+ \| squad-384 packed [0-9]+ real tokens/s, [0-9.]+x Hugging Face's \|"
grep -q '^squad-384 Hugging Face, padded ' "$scratch/out/finetune.log" ||
  fail "bench/finetune printed no row of its peer"
grep -q '^squad-384: packed-bert packed / Hugging Face BertForQuestionAnswering (SDPA, torch stand-in) padded' \
  "$scratch/out/finetune.log" || fail "bench/finetune printed no ratio to its peer"
[ -s "$scratch/plan-squad-384.json" ] || fail "bench/finetune wrote no plan-squad-384.json for its peer"
expect alone 'ok \| [0-9]+ \| large 123 real tokens/s \|'

# A budget spent: the stages after the first are skipped, and said so.
status=0
env PATH="$scratch/bin:$PATH" OUT="$scratch/out2" PBERT_GPU_RESULTS="$scratch/results2" \
  PBERT_GPU_BUDGET=8 PBERT_GPU_STAGE_MACHINE='sleep 2' PBERT_GPU_STAGE_BUILD='sleep 30' \
  bash scripts/gpu quick "$scratch/deps" >/dev/null 2>&1 || status=$?
mkdir -p "$scratch/out2"
((status == 1)) || fail "the spent budget's run exited with $status, not 1"
summary=$scratch/results2/summary.md
grep -qE '^\| machine \| ok ' "$summary" || fail "machine did not run within the budget"
grep -qE '^\| build \| timed out \([0-9] s\)' "$summary" || fail "build was not cut to what was left"
grep -qE '^\| sanitizer \| skipped \(no time left of the 8 s\)' "$summary" ||
  fail "sanitizer was not skipped when no time was left"

# A rerun of some stages (PBERT_GPU_STAGES): those and the machine stage,
# in the mode's order, and no others.
status=0
env PATH="$scratch/bin:$PATH" PBERT_GPU_RESULTS="$scratch/results4" PBERT_GPU_STAGES=sanitizer,kernels \
  PBERT_GPU_STAGE_MACHINE='echo "[key] a stand-in H100"' PBERT_GPU_STAGE_KERNELS='echo "[key] 8 kernels"' \
  PBERT_GPU_STAGE_SANITIZER='echo "[key] ERROR SUMMARY: 0 errors"' PBERT_GPU_STAGE_BUILD='exit 3' \
  bash scripts/gpu quick "$scratch/deps" >"$scratch/rerun.log" 2>&1 || status=$?
((status == 0)) || fail "the rerun of two stages exited with $status: $(cat "$scratch/rerun.log")"
rows=$(sed -n 's/^| \([a-z-]*\) | .*/\1/p' "$scratch/results4/summary.md" | grep -vx stage | tr '\n' ' ')
[ "$rows" = "machine kernels sanitizer " ] ||
  fail "PBERT_GPU_STAGES=sanitizer,kernels ran '$rows', not 'machine kernels sanitizer'"
grep -q '; stages asked: sanitizer,kernels$' "$scratch/results4/summary.md" ||
  fail "the summary does not say which stages were asked for"
# A name that is no stage of the mode: one line naming the mode's stages,
# exit 2, nothing written.
status=0
env PATH="$scratch/bin:$PATH" PBERT_GPU_RESULTS="$scratch/results5" PBERT_GPU_STAGES=levers,tests \
  bash scripts/gpu quick "$scratch/deps" >"$scratch/bad.log" 2>&1 || status=$?
if ((status != 2)) || [ "$(wc -l <"$scratch/bad.log")" != 1 ] || [ -e "$scratch/results5" ] ||
  ! grep -q "PBERT_GPU_STAGES names 'tests', which is no stage of scripts/gpu quick (machine,build,cuda-tests,kernels,levers,profiles,sanitizer,finetune,alone)" "$scratch/bad.log"; then
  fail "PBERT_GPU_STAGES=levers,tests: not refused in one line (exit $status): $(cat "$scratch/bad.log")"
fi
status=0
env PATH="$scratch/bin:$PATH" PBERT_GPU_RESULTS="$scratch/results5" PBERT_GPU_STAGES=, \
  bash scripts/gpu quick "$scratch/deps" >"$scratch/bad.log" 2>&1 || status=$?
if ((status != 2)) || [ "$(wc -l <"$scratch/bad.log")" != 1 ] || [ -e "$scratch/results5" ] ||
  ! grep -q "PBERT_GPU_STAGES=',' names no stage" "$scratch/bad.log"; then
  fail "PBERT_GPU_STAGES=,: not refused in one line (exit $status): $(cat "$scratch/bad.log")"
fi

# A budget or a stage's limit that is no number of seconds: one line
# naming the variable, exit 2, nothing written.
for bad in PBERT_GPU_BUDGET=abc PBERT_GPU_BUDGET=0 PBERT_GPU_LIMIT_BUILD=-5; do
  status=0
  env PATH="$scratch/bin:$PATH" PBERT_GPU_RESULTS="$scratch/results3" "$bad" \
    bash scripts/gpu quick "$scratch/deps" >"$scratch/bad.log" 2>&1 || status=$?
  if ((status != 2)) || [ "$(wc -l <"$scratch/bad.log")" != 1 ] ||
    ! grep -q "${bad%%=*} must be a whole number" "$scratch/bad.log" || [ -e "$scratch/results3" ]; then
    fail "$bad: not refused in one line (exit $status): $(cat "$scratch/bad.log")"
  fi
done

# Without a GPU (no nvidia-smi on PATH): one line, exit 2.
status=0
env PATH=/usr/bin:/bin bash scripts/gpu quick "$scratch/deps" >"$scratch/none.log" 2>&1 || status=$?
if ((status != 2)) || ! grep -q "no CUDA GPU here" "$scratch/none.log"; then
  fail "without a GPU it did not refuse in one line (exit $status): $(cat "$scratch/none.log")"
fi
echo "gpu_dry_run: every stage's outcome, log and the summary came back"
