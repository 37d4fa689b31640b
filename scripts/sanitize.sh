#!/usr/bin/env bash
# The fast CPU tests under AddressSanitizer + UndefinedBehaviorSanitizer: the `debug` preset
# (gcc, -O0, -fsanitize=address,undefined -fno-sanitize-recover=all) in build-debug, ctest
# labels core, model, text and kv: the unit tests of config.json and safetensors loading,
# the tokenizers, the Jinja interpreter and every KV codec. The suites that run whole models
# (backend, runtime, apps, server, readme) stay in the release run only: at -O0 under ASan
# they take tens of minutes on CI's 2 cores. Any sanitizer report fails the test it occurs in.
#   scripts/sanitize.sh                      build and run (10.6 min at -j1 on a shared core: 493 s build, 146 s tests)
#   SANITIZE_LABELS='^(text)$' scripts/sanitize.sh    other ctest labels (build their targets first)
#   SANITIZE_JOBS=N                          build and ctest jobs (default: nproc)
set -euo pipefail
cd "$(dirname "$0")/.."
LABELS=${SANITIZE_LABELS:-'^(core|model|text|kv)$'}
t0=$(date +%s)
cmake --preset debug > /dev/null
cmake --build build-debug -j"${SANITIZE_JOBS:-$(nproc)}" --target test_core test_model test_text test_kv
t1=$(date +%s)
# NOTE: abort_on_error / halt_on_error make a report fail the test even where a test harness
# would catch the exception UBSan's recoverable checks do not throw.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
  ctest --test-dir build-debug -L "$LABELS" --output-on-failure -j"${SANITIZE_JOBS:-$(nproc)}" --timeout 900
t2=$(date +%s)
echo "sanitize.sh: build $((t1 - t0)) s, tests $((t2 - t1)) s (labels $LABELS)"
