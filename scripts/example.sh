#!/usr/bin/env bash
# Loom's main job on its bundled example, on a fresh machine: installs
# dependencies and builds, exports a byte-level GPT (vocab 256) from PyTorch
# to ONNX in training mode (examples/gpt/export_for_training.py), cuts
# examples/gpt/data/corpus.txt into next-byte windows, and trains the model
# on RANKS ranks of this machine (one per core) with the layout the planner
# chooses (`loom-run --train --parallel auto`: it calibrates the machine,
# compiles and replays every layout, and prints its choice and why the
# others lost; docs/design/planner.md). It saves the trained ONNX, trains
# the same steps on one rank as the reference, and prints a summary: the
# loss before and after, time per step, the parallel run's losses against
# the one-rank run's, and a few bytes sampled greedily from the model before
# and after training (by loom-run, from the ONNX).
#
# The data set is SAMPLES overlapping windows of BLOCK bytes at evenly spaced
# offsets, reshuffled every epoch (--shuffle): with non-overlapping stride-BLOCK
# windows every byte always sits at the same position, and the model
# memorizes by absolute position (low loss, gibberish samples) instead of
# learning text. 600 steps take the loss from ~5.7 to ~1.0 nats per byte in
# about 20-30 s of training on 2 cores.
#
#   scripts/example.sh
#
# Environment (defaults): STEPS=600 BATCH=16 LR=5e-3 SAMPLES=2048 BLOCK=64
#   LAYERS=2 HEADS=4 EMBD=128 SEED=0 SAMPLE_BYTES=48 (0: no sampling)
#   RANKS=<cores> (1: one rank, no planning)
#   PROMPT="The compiler " BUILD_DIR=build
# Outputs in $BUILD_DIR/examples: gpt.onnx (untrained), bytes/ (data set),
# gpt-train-metrics.jsonl (one line per step), gpt-trained.onnx.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
python=/usr/bin/python3

STEPS="${STEPS:-600}" BATCH="${BATCH:-16}" LR="${LR:-5e-3}"
SAMPLES="${SAMPLES:-2048}"
BLOCK="${BLOCK:-64}" LAYERS="${LAYERS:-2}" HEADS="${HEADS:-4}"
EMBD="${EMBD:-128}" SEED="${SEED:-0}" SAMPLE_BYTES="${SAMPLE_BYTES:-48}"
PROMPT="${PROMPT:-The compiler }"
RANKS="${RANKS:-$(nproc)}"
# One BLAS thread per rank: the ranks are the parallelism.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# Set-up progress goes to stderr; stdout is the result.
"$root/scripts/bootstrap.sh" >&2
work="$build/examples"
mkdir -p "$work"
model="$work/gpt.onnx"
data="$work/bytes"
metrics="$work/gpt-train-metrics.jsonl"
trained="$work/gpt-trained.onnx"
corpus="$root/examples/gpt/data/corpus.txt"
indent() { sed "s|$root/||g; s/^/  /"; }

echo "== Exporting examples/gpt/export_for_training.py (byte-level GPT," \
  "training-mode ONNX, opset 17)"
"$python" "$root/examples/gpt/export_for_training.py" "$model" \
  --block-size "$BLOCK" --layers "$LAYERS" --heads "$HEADS" --embd "$EMBD" \
  --seed "$SEED" 2>&1 | indent

echo
echo "== Data set: ${corpus#"$root"/} as bytes, $SAMPLES windows of $BLOCK"
"$python" "$root/examples/gpt/make_byte_dataset.py" "$corpus" "$data" \
  --block-size "$BLOCK" --samples "$SAMPLES" 2>&1 | indent

# The causal-mask buffers (h.<i>.attn.bias) are float initializers but only
# compared, never differentiated: like PyTorch, Loom leaves them untouched.
common=("$build/bin/loom-run" "$model" --train
  --input "idx=$data/input.npy" --labels "$data/labels.npy"
  --loss cross_entropy --batch-size "$BATCH" --steps "$STEPS" --shuffle "$SEED"
  --optimizer adamw --lr "$LR")
reference="$work/gpt-train-metrics-1-rank.jsonl"
train=("${common[@]}" --metrics "$metrics" --save "$trained")
if ((RANKS > 1)); then
  train+=(--parallel auto --ranks "$RANKS")
fi
echo
echo "== ${train[*]}" | sed "s|$root/||g"
rm -f "$metrics" "$trained" "$reference"
start=$(date +%s.%N)
# (The per-step progress lines are left out: the summary below has them.)
"${train[@]}" | tee "$work/train-output.txt" | { grep -v '^step ' || true; } |
  indent
end=$(date +%s.%N)
if ((RANKS > 1)); then
  echo
  echo "== The same steps on one rank, the reference"
  "${common[@]}" --metrics "$reference" >/dev/null
fi

echo
echo "== Result"
"$python" - "$metrics" "$model" "$trained" "$start" "$end" "$reference" \
  "$work/train-output.txt" <<'EOF' | indent
import json, math, statistics, sys
import numpy as np
import onnx
from onnx import numpy_helper

metrics, before, after, start, end, reference, output = sys.argv[1:]
rows = [json.loads(line) for line in open(metrics) if line.strip()]
loss = [r["loss"] for r in rows]
ms = [r["step_ms"] for r in rows[2:]] or [r["step_ms"] for r in rows]
tail = loss[-10:]
print(f"steps: {len(rows)}   wall time: {float(end) - float(start):.1f} s "
      f"(compile included)   step: {statistics.median(ms):.1f} ms median, "
      f"{statistics.median(r['samples_per_s'] for r in rows):.0f} samples/s")
print(f"loss: first {loss[0]:.4f} (uniform guess: ln 256 = {math.log(256):.4f})"
      f"   last {loss[-1]:.4f}   mean of last {len(tail)} "
      f"{statistics.mean(tail):.4f} ({statistics.mean(tail) / math.log(2):.2f} "
      f"bits per byte)")
import re
planned = re.search(r"predicted: step ([0-9.]+) (m?s)", open(output).read())
if planned:
    predicted = float(planned.group(1)) * (1 if planned.group(2) == "ms" else 1e3)
    print(f"planner's prediction: {predicted:.1f} ms per step; measured "
          f"{statistics.median(ms):.1f} ms "
          f"({100 * (predicted / statistics.median(ms) - 1):+.0f}%)")
marks = sorted({0, *range(len(loss) // 10 or 1, len(loss), len(loss) // 10 or 1),
                len(loss) - 1})
print("loss by step: " + "  ".join(f"{i}:{loss[i]:.2f}" for i in marks))
try:
    ref = [json.loads(line)["loss"] for line in open(reference) if line.strip()]
except FileNotFoundError:
    ref = []
if ref:
    # Two summation orders give losses equal to rounding at first; training
    # amplifies the difference, as it would between any two machines.
    rel = [abs(a - b) / abs(b) for a, b in zip(loss, ref)]
    early = min(50, len(rel))
    print(f"against one rank: the first {early} losses within "
          f"{max(rel[:early]):.1e} relative, every step within {max(rel):.1e}; "
          f"last {loss[-1]:.4f} vs {ref[-1]:.4f}")
    if len(ref) != len(loss) or max(rel[:early]) > 1e-5:
        sys.exit("the parallel run does not train like one rank")
w0 = {t.name: numpy_helper.to_array(t) for t in onnx.load(before).graph.initializer}
w1 = {t.name: numpy_helper.to_array(t) for t in onnx.load(after).graph.initializer}
changed = [n for n in w0 if n in w1 and not np.array_equal(w0[n], w1[n])]
print(f"saved: {after} ({len(changed)} of {len(w0)} initializers trained, "
      f"{len(set(w0) - set(w1))} missing)")
EOF

if ((SAMPLE_BYTES > 0)); then
  echo
  echo "== Greedy samples ($SAMPLE_BYTES bytes after \"$PROMPT\", run by loom-run)"
  for which in "untrained:$model" "trained:$trained"; do
    printf "  %-10s " "${which%%:*}"
    "$python" "$root/examples/gpt/sample.py" "${which#*:}" "$PROMPT" \
      --bytes "$SAMPLE_BYTES" --loom-run "$build/bin/loom-run" \
      || echo "(sampling failed)"
  done
fi
