#!/usr/bin/env bash
# The whole parity matrix of pipeline layouts (too long for CI, which runs
# a cross-section in test/Examples/train-pipeline*.test):
#
#   benchmarks/pipeline/parity.sh [BUILD_DIR]          (default: build/)
#
# The example GPT and MLP of test/Examples (AdamW, 20 steps, batch 8),
# pp in {2, 4} x M in {1, 4, 8} x every schedule (interleaved with 2 stages
# per rank, where the model has 2 P cut points and P divides M), each
# compared with the 1-rank run that accumulates the same M microbatches
# (1e-5 relative) and with PyTorch (1e-4). Prints one line per layout and
# "all layouts match" or the mismatches (exit 1).
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$HERE/../.."
BUILD="${1:-$ROOT/build}"
PYTHON=/usr/bin/python3
LOOM_RUN="$BUILD/bin/loom-run"
INPUTS="$ROOT/test/Examples/Inputs"
[ -x "$LOOM_RUN" ] || { echo "no $LOOM_RUN: build Loom first" >&2; exit 1; }
WORK="$(mktemp -d /tmp/loom-pp-parity.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
failed=0
for model in gpt mlp; do
  input=idx
  [ "$model" = mlp ] && input=x
  for m in 1 4 8; do
    d="$WORK/$model-m$m"
    "$PYTHON" "$INPUTS/train_reference.py" "$model" "$d" --optimizer adamw \
      --lr 1e-2 --weight-decay 0.01 --eps 1e-5 --steps 20 --batch-size 8 \
      --grad-accum "$m" >/dev/null
    common=(--train --input "$input=$d/input.npy" --labels "$d/labels.npy"
      --batch-size 8 --steps 20 --optimizer adamw --lr 1e-2 --betas
      0.9,0.999 --eps 1e-5 --weight-decay 0.01)
    "$LOOM_RUN" "$d/model.onnx" "${common[@]}" --grad-accum "$m" \
      --metrics "$d/one.jsonl" --save-weights "$d/one" >/dev/null
    "$PYTHON" "$INPUTS/run_as_reference.py" "$d/one.jsonl" "$d/one" \
      "$d/one-ref" --exclude 'h\.[0-9]+\.attn\.c_attn\.bias' >/dev/null
    for pp in 2 4; do
      [ "$model" = mlp ] && [ "$pp" = 4 ] && continue  # 2 cut points
      for schedule in gpipe 1f1b interleaved zb-h1; do
        extra=()
        if [ "$schedule" = interleaved ]; then
          # 2 P stages: the GPT's 5 cut points allow P = 2; P divides M.
          { [ "$model" = mlp ] || [ "$pp" = 4 ] || ((m % pp)); } && continue
          extra=(--virtual-stages 2)
        fi
        name="$model pp $pp M $m $schedule"
        if ! "$LOOM_RUN" "$d/model.onnx" "${common[@]}" --pp "$pp" \
          --ranks "$pp" --microbatches "$m" --schedule "$schedule" \
          "${extra[@]}" --metrics "$d/pp.jsonl" --save "$d/pp.onnx" \
          >"$d/pp.log" 2>&1; then
          echo "$name: FAILED: $(tail -1 "$d/pp.log")"
          failed=1
          continue
        fi
        one=$("$PYTHON" "$INPUTS/compare_training.py" "$d/one-ref" \
          "$d/pp.jsonl" "$d/pp.onnx" --rtol 1e-5 | tail -1)
        torch=$("$PYTHON" "$INPUTS/compare_training.py" "$d/ref" \
          "$d/pp.jsonl" "$d/pp.onnx" --rtol 1e-4 | tail -1)
        echo "$name: one rank: $one; PyTorch: $torch"
        case "$one$torch" in *FAILED*|*MISMATCH*) failed=1 ;; esac
      done
    done
  done
done
((failed)) && { echo "MISMATCH"; exit 1; }
echo "all layouts match"
