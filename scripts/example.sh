#!/usr/bin/env bash
# Loom's main job on its bundled example, on a fresh machine: installs
# dependencies and builds, exports a byte-level GPT (vocab 256) from PyTorch
# to ONNX in training mode (examples/gpt/export_for_training.py), cuts
# examples/gpt/data/corpus.txt into next-byte windows, trains the model with
# `loom-run --train` (AdamW), saves the trained ONNX, and prints a summary:
# the loss before and after, time per step, and a few bytes sampled greedily
# from the model before and after training (by loom-run, from the ONNX).
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
train=("$build/bin/loom-run" "$model" --train
  --input "idx=$data/input.npy" --labels "$data/labels.npy"
  --loss cross_entropy --batch-size "$BATCH" --steps "$STEPS" --shuffle "$SEED"
  --optimizer adamw --lr "$LR"
  --metrics "$metrics" --save "$trained")
echo
echo "== ${train[*]}" | sed "s|$root/||g"
rm -f "$metrics" "$trained"
start=$(date +%s.%N)
"${train[@]}" | indent
end=$(date +%s.%N)

echo
echo "== Result"
"$python" - "$metrics" "$model" "$trained" "$start" "$end" <<'EOF' | indent
import json, math, statistics, sys
import numpy as np
import onnx
from onnx import numpy_helper

metrics, before, after, start, end = sys.argv[1:]
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
marks = sorted({0, *range(len(loss) // 10 or 1, len(loss), len(loss) // 10 or 1),
                len(loss) - 1})
print("loss by step: " + "  ".join(f"{i}:{loss[i]:.2f}" for i in marks))
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
