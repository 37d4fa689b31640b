#!/usr/bin/env bash
# Builds everything and runs every test (CPU tests; GPU tests skip without a GPU).
#   scripts/test.sh            CPU build in build/
#   NINFER_CUDA=1 scripts/test.sh   also compile the CUDA backend (sm_90 only unless
#                                   CMAKE_CUDA_ARCHITECTURES is set) and run its tests
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
BUILD=${BUILD_DIR:-build}
ARGS=(-S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release)
if [ "${NINFER_CUDA:-0}" = 1 ]; then
  ARGS+=(-DNINFER_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES:-90}")
fi
cmake "${ARGS[@]}"
cmake --build "$BUILD" -j"$(nproc)"
if [ -f tests/server/package.json ]; then
  (cd tests/server && npm install --no-audit --no-fund --silent)
fi
ctest --test-dir "$BUILD" --output-on-failure -j"$(nproc)" --timeout 1800
