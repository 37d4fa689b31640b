#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang, ASan + UBSan, CPU only) in build-fuzz and
# runs each for SECONDS on its corpus, then prints one table row per target: executions,
# executions per second, corpus size and the result. Exits non-zero if any target crashed,
# timed out, ran out of memory or broke an invariant; the input that did it is left in
# build-fuzz/fuzz/crashes/ (replay: build-fuzz/bin/fuzz_TARGET FILE).
#   scripts/fuzz.sh [SECONDS]          every target, SECONDS each (default 60)
#   FUZZ_TARGETS="kv_decode safetensors" scripts/fuzz.sh 600    some targets
#   FUZZ_JOBS=N       build jobs (default: nproc)
#   FUZZ_NICE=N       run the fuzzers under nice -n N (default 0)
#   NINFER_SHARED_DIR ../shared by default: its models and configs are added to the seeds
# Seeds: tests/fuzz/corpus/TARGET (small, committed) plus the real files of tests/data and
# ../shared gathered here into build-fuzz/fuzz/seeds/TARGET; what a run finds is kept in
# build-fuzz/fuzz/corpus/TARGET, so later runs start from it.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-60}
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
SHARED=${NINFER_SHARED_DIR:-../shared}
ALL=(safetensors model_config tokenizer_load tokenizer_encode chat_template openai_request json_schema kv_decode)
read -r -a TARGETS <<< "${FUZZ_TARGETS:-${ALL[*]}}"

scripts/deps.sh --fuzz
mkdir -p "$BUILD"
CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNINFER_FUZZ=ON \
  -DNINFER_TESTS=OFF -DNINFER_CUDA=OFF > "$BUILD/cmake.log" 2>&1 || { cat "$BUILD/cmake.log"; exit 1; }
cmake --build "$BUILD" -j"${FUZZ_JOBS:-$(nproc)}" --target "${TARGETS[@]/#/fuzz_}"

W=$BUILD/fuzz
mkdir -p "$W/crashes" "$W/logs"
# ---- seeds from real files (rebuilt each run) ----
rm -rf "$W/seeds"
for t in "${TARGETS[@]}"; do mkdir -p "$W/seeds/$t" "$W/corpus/$t"; done
seed() {  # seed TARGET NAME < bytes
  local d=$W/seeds/$1
  [ -d "$d" ] && cat > "$d/$2" || cat > /dev/null
}
n=0
# safetensors: the header of every real file (its data sections are too big to be seeds; the
# committed seeds carry small valid files).
for f in tests/data/tiny/*/model.safetensors "$SHARED"/models/*/*.safetensors; do
  [ -f "$f" ] || continue
  hlen=$(od -An -t u8 -N 8 "$f" | tr -d ' ')
  head -c $((8 + hlen)) "$f" | seed safetensors "hdr$((n++))"
done
for f in tests/data/configs/*.json tests/data/tiny/*/config.json "$SHARED"/real-configs/*/config.json \
         "$SHARED"/models/*/config.json; do
  [ -f "$f" ] && seed model_config "cfg$((n++))" < "$f"
done
for d in tests/data/tokenizers/* "$SHARED"/models/stories260k; do
  [ -f "$d/tokenizer.json" ] || continue
  { cat "$d/tokenizer.json"; printf '\0'; [ -f "$d/tokenizer_config.json" ] && cat "$d/tokenizer_config.json"
    printf '\0Hello world! <s> caf\xc3\xa9 123\n'; } | seed tokenizer_load "tok$((n++))"
done
for f in "$SHARED"/corpus/*.txt; do
  [ -f "$f" ] && { printf '\x02'; head -c 2048 "$f"; } | seed tokenizer_encode "text$((n++))"
done
P=tests/fuzz/seed_parts
for f in tests/data/chat_templates/*.jinja tests/data/chat_templates/real/*.jinja; do
  [ -f "$f" ] || continue
  { cat "$f"; printf '\0'; cat $P/messages.json; printf '\0'; cat $P/tools.json; printf '\0'; cat $P/kwargs.json; } |
    seed chat_template "tmpl$((n++))"
  { cat "$f"; printf '\0'; cat $P/messages.json; } | seed chat_template "tmpl$((n++))"
done

# ---- runs ----
printf '\n%-18s %14s %10s %8s  %s\n' target executions exec/s corpus result
status=0
for t in "${TARGETS[@]}"; do
  dict=()
  case $t in
    chat_template) dict=(-dict=tests/fuzz/dict/jinja.dict) ;;
    safetensors|model_config|tokenizer_load|openai_request|json_schema) dict=(-dict=tests/fuzz/dict/json.dict) ;;
  esac
  seeds=("$W/seeds/$t")
  [ -d "tests/fuzz/corpus/$t" ] && seeds+=("tests/fuzz/corpus/$t")
  log=$W/logs/$t.log
  rc=0
  # NOTE: -timeout 10 s per input (the slowest real seed takes well under 1 s under ASan);
  # -rss_limit_mb 2048 keeps three engineers' fuzzers inside the machine's memory.
  nice -n "${FUZZ_NICE:-0}" "$BUILD/bin/fuzz_$t" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 "${dict[@]}" -artifact_prefix="$W/crashes/$t-" "$W/corpus/$t" "${seeds[@]}" \
    > "$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  corpus=$(find "$W/corpus/$t" -type f | wc -l)
  if [ "$rc" = 0 ]; then
    result=ok
  else
    result="FAILED (rc $rc): $(grep -m1 -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' "$log" || echo "see $log")"
    status=1
  fi
  printf '%-18s %14s %10s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "$corpus" "$result"
done
exit $status
