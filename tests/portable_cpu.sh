#!/usr/bin/env bash
# One binary for any x86-64 CPU (core/hot_loop.h, cpu_fast.h). Runs ninfer under qemu-user
# emulating a CPU without AVX (-cpu Nehalem: SSE4.2; no AVX, AVX2, FMA or AVX-512), where every
# NINFER_HOT_LOOP function takes its baseline version and the fast kernels their portable
# ones, and checks against the same binary run natively (its x86-64-v3 versions):
#   1. it runs at all: no illegal instruction, start-up included;
#   2. the KV codecs' baseline versions write the same bytes: kv-bench's errors of every
#      format (nmse, q.k error), printed to every digit, are equal (one differing code moves them);
#   3. greedy decoding of the reference model gives the same text.
# Skipped (exit 77) without qemu-x86_64 (Debian's qemu-user) or the reference model, or on a
# host that is not x86-64.
#   tests/portable_cpu.sh NINFER_BIN SHARED_DIR
set -euo pipefail
BIN=$1 SHARED=$2
MODEL=$SHARED/models/ref-qwen3-d256
[ "$(uname -m)" = x86_64 ] || { echo "SKIP: not an x86-64 host"; exit 77; }
command -v qemu-x86_64 > /dev/null || { echo "SKIP: qemu-x86_64 not installed (apt-get install qemu-user)"; exit 77; }
EMU=(qemu-x86_64 -cpu Nehalem)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

"${EMU[@]}" "$BIN" kv-bench --rows 512 --seed 3 --head-dim 256 --json > "$TMP/emu.json" ||
  { echo "FAIL: kv-bench under ${EMU[*]} exited $?"; exit 1; }
"$BIN" kv-bench --rows 512 --seed 3 --head-dim 256 --json > "$TMP/native.json"
python3 - "$TMP/native.json" "$TMP/emu.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert len(a) == len(b) and len(a) >= 16, f"{len(a)} vs {len(b)} rows"
# nmse and ip_err are sums of the decoded rows' errors: a single differing code moves them. The
# other fields come from libm (log10, pow), which glibc itself dispatches on the CPU (last bits).
def same(x, y):
    if x.keys() != y.keys() or any(x[k] != y[k] for k in ("format", "side", "source", "nmse", "ip_err")):
        return False
    return all(abs(x[k] - y[k]) <= 1e-9 * abs(x[k]) for k in x if isinstance(x[k], float))
bad = [(x, y) for x, y in zip(a, b) if not same(x, y)]
for x, y in bad[:4]:
    print("FAIL: codec statistics differ between the x86-64-v3 and baseline versions:\n ", x, "\n ", y)
if bad: sys.exit(1)
print(f"kv-bench: {len(a)} format/side/source rows identical")
PY

if [ -d "$MODEL" ]; then
  ARGS=(run -m "$MODEL" --device cpu --threads 2 -p "The capital of France is" -n 12 --temp 0)
  "${EMU[@]}" "$BIN" "${ARGS[@]}" --kv-dtype rk4v4-e8 > "$TMP/emu.txt" 2> "$TMP/emu.err" ||
    { echo "FAIL: run under ${EMU[*]} exited $?"; tail -5 "$TMP/emu.err"; exit 1; }
  "$BIN" "${ARGS[@]}" --kv-dtype rk4v4-e8 > "$TMP/native.txt" 2> /dev/null
  if ! cmp -s "$TMP/emu.txt" "$TMP/native.txt"; then
    echo "FAIL: greedy text differs"; diff "$TMP/native.txt" "$TMP/emu.txt"; exit 1
  fi
  echo "run: the same greedy text: $(tr '\n' ' ' < "$TMP/native.txt")"
else
  echo "note: $MODEL missing, the model run is skipped"
fi
echo "PASS"
