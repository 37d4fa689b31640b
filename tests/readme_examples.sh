#!/usr/bin/env bash
# Runs every example command of README.md's "## Commands" section as written (ctest
# `readme_examples`), so that the README cannot drift from the CLI:
#   tests/readme_examples.sh NINFER_BIN [SHARED_DIR] [README]
# The examples' `ninfer` is NINFER_BIN and their ../shared is SHARED_DIR; files they write under
# /tmp/ go to a private temporary directory instead (parallel runs do not collide). A line
# ending in `# GPU` is skipped, with the reason printed, unless NINFER_README_GPU=1. A line
# ending in `&` (the server) runs in the background: the script waits for its "listening on"
# line, points the `localhost:8080` of the lines after it at the port it printed (it is started
# with --port 0), and `kill %1` stops it. Any example that exits non-zero fails the test; so do
# a server that never listens and a chat completion without "choices".
# Exit 77 (ctest: skipped) when SHARED_DIR has no models/ref-qwen3-d256.
set -uo pipefail
BIN=${1:?usage: tests/readme_examples.sh NINFER_BIN [SHARED_DIR] [README]}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${2:-$ROOT/../shared}
README=${3:-$ROOT/README.md}
cd "$ROOT" || exit 1
if [ ! -d "$SHARED/models/ref-qwen3-d256" ]; then
  echo "readme_examples: skipped: $SHARED/models/ref-qwen3-d256 not found (the examples use the reference model)"
  exit 77
fi
[ -x "$BIN" ] || { echo "readme_examples: $BIN is not an executable"; exit 1; }
SHARED=$(cd "$SHARED" && pwd)
TMP=$(mktemp -d)
SERVER_PID=""
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
export OMP_WAIT_POLICY=passive  # the CPU backend under contention (docs/NOTES.md)

# The first ```sh block after "## Commands".
mapfile -t LINES < <(awk '/^## Commands/ {s = 1} s && /^```sh/ {b = 1; next} b && /^```/ {exit} b {print}' "$README")
[ ${#LINES[@]} -gt 0 ] || { echo "readme_examples: no \`\`\`sh block under '## Commands' in $README"; exit 1; }

ran=0 skipped=0 failed=0 port=""
for line in "${LINES[@]}"; do
  [[ -z "${line// }" ]] && continue
  cmd=${line//..\/shared/$SHARED}
  cmd=${cmd//\/tmp\//$TMP/}
  cmd=$(sed -E "s#(^|\| *)ninfer #\1$BIN #" <<< "$cmd")
  if [[ "$line" =~ \#\ GPU[[:space:]]*$ ]] && [ "${NINFER_README_GPU:-0}" != 1 ]; then
    echo "--- skip (needs the CUDA backend and a GPU; NINFER_README_GPU=1 runs it): $line"
    skipped=$((skipped + 1))
    continue
  fi
  echo "--- $line"
  if [[ "$line" =~ ^[A-Za-z_]+= ]]; then  # a variable for the lines below
    eval "export $cmd"
    continue
  fi
  if [[ "$cmd" =~ \&[[:space:]]*$ ]]; then  # the server, in the background on a free port
    cmd=$(sed -E 's/--port [0-9]+/--port 0/; s/&[[:space:]]*$//' <<< "$cmd")
    bash -c "exec $cmd" 2> "$TMP/server.log" &
    SERVER_PID=$!
    for _ in $(seq 1 120); do
      port=$(grep -o 'listening on http://[^ ]*' "$TMP/server.log" | sed 's/.*://')
      [ -n "$port" ] && break
      kill -0 "$SERVER_PID" 2>/dev/null || break
      sleep 0.5
    done
    if [ -z "$port" ]; then
      echo "FAILED: the server did not print 'listening on' within 60 s:"; cat "$TMP/server.log"
      failed=$((failed + 1)); SERVER_PID=""
    else
      echo "(listening on port $port)"; ran=$((ran + 1))
    fi
    continue
  fi
  if [[ "$line" =~ ^kill\ %1 ]]; then
    if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null; SERVER_PID=""; fi
    continue
  fi
  if [[ "$line" =~ ^curl ]]; then
    [ -n "$port" ] || { echo "FAILED: no server to send it to"; failed=$((failed + 1)); continue; }
    cmd=${cmd//localhost:8080/127.0.0.1:$port}
    out=$(timeout 120 bash -c "$cmd --fail-with-body")
    rc=$?
    echo "$out" | head -c 600; echo
    if [ $rc -ne 0 ] || ! grep -q '"choices"' <<< "$out"; then
      echo "FAILED (exit $rc, or no \"choices\" in the response)"; failed=$((failed + 1))
    else
      ran=$((ran + 1))
    fi
    continue
  fi
  start=$(date +%s)
  timeout 300 bash -c "$cmd" > "$TMP/out.txt" 2> "$TMP/err.txt"
  rc=$?
  tail -n 4 "$TMP/out.txt"
  if [ $rc -ne 0 ]; then
    echo "FAILED (exit $rc):"; tail -n 20 "$TMP/err.txt"; failed=$((failed + 1))
  else
    echo "(ok, $(( $(date +%s) - start )) s)"; ran=$((ran + 1))
  fi
done
echo "readme_examples: $ran ran, $skipped skipped, $failed failed"
[ $ran -gt 0 ] && [ $failed -eq 0 ]
