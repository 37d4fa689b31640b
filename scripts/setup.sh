#!/usr/bin/env bash
# One-command set-up: installs dependencies, builds build/bin/ninfer (CPU; add --cuda for the
# CUDA backend when nvcc is present), and runs a short generation on a model:
#   scripts/setup.sh [MODEL_DIR] [--cuda]
# MODEL_DIR defaults to ../shared/models/ref-qwen3-d256 when it exists.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=""
PRESET=cpu
for a in "$@"; do
  case "$a" in
    --cuda) PRESET=cuda ;;
    *) MODEL="$a" ;;
  esac
done
scripts/deps.sh
BUILD=build
if [ "$PRESET" = cuda ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNINFER_CUDA=ON
else
  cmake --preset cpu
fi
cmake --build "$BUILD" -j"$(nproc)" --target ninfer
echo "built $BUILD/bin/ninfer"
if [ -z "$MODEL" ] && [ -d ../shared/models/ref-qwen3-d256 ]; then
  MODEL=../shared/models/ref-qwen3-d256
fi
if [ -n "$MODEL" ]; then
  echo "--- ninfer run -m $MODEL (chat, greedy)"
  "$BUILD/bin/ninfer" run -m "$MODEL" --chat --temp 0 -n 32 \
    -p "The secret number for Rosa is 40417. The weather was mild that year.

What is the secret number for Rosa?"
  echo
else
  echo "no model directory given and ../shared/models/ref-qwen3-d256 not found; skipping the demo run"
fi
