#!/usr/bin/env bash
# ninfer's CPU backend beside llama.cpp's llama-bench on the same model, same threads, one run.
#
#   bench/llama_cpp/compare.sh [--out FILE] [--model DIR] [--threads N] [--reps N]
#                              [--only llama|ninfer] [--kv LIST] [--llama-kv LIST]
#
# Points (both engines): prompt processing of 512 tokens at depth 0; decode of 64 tokens
# after a context of 0 (ctx 1..64) and of 2048 (ctx 2049..2112). --reps rounds (default 3),
# each running every configuration of both engines once (one process per point); the
# median over the rounds is reported.
#   llama.cpp: bf16 GGUF weights, KV f16 with flash attention off and on, q8_0 and q4_0
#              (quantised V needs flash attention in llama.cpp, so those run with -fa 1).
#              llama-bench -r 1: one timed repetition after its warm-up.
#   ninfer:    `ninfer bench --device cpu` for each --kv-dtype: prefill --repeats 1 after a
#              warm-up; decode tokens/s from the median step of 64 (after 2 warm-up steps).
# Prints one markdown table; writes every raw number to --out (default /tmp/llama_compare.json)
# and keeps the raw tool output in a folder beside it (FILE.raw/).
#
# Environment:
#   LLAMA_BENCH  llama-bench binary (default /work/llama-cpp-build/bin/llama-bench; not built
#                by this script)
#   NINFER       ninfer binary (default build-cu/bin/ninfer of this repo)
#   GGUF         converted model (default /work/llama-cpp-build/models/<model>-bf16.gguf; made
#                by hf_to_gguf.py when missing or older than the checkpoint)
#   NICE         priority prefix for every benchmark (default "nice -n 19")
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUT=/tmp/llama_compare.json
MODEL=/work/shared/models/ref-qwen3-d256
THREADS=2
REPS=3
ONLY=
NINFER_KV="bf16 int8 int4 rk4v4-e8 rk2v4-e8"
LLAMA_KV="f16:0 f16:1 q8_0:1 q4_0:1"   # cache type : flash attention
PROMPT=512 GEN=64 DEPTH=2048

die() { echo "compare.sh: error: $*" >&2; exit 1; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --out) OUT=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --kv) NINFER_KV=${2//,/ }; shift 2 ;;
    --llama-kv) LLAMA_KV=${2//,/ }; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
[[ -z $ONLY || $ONLY == llama || $ONLY == ninfer ]] || die "--only takes llama or ninfer"

LLAMA_BENCH=${LLAMA_BENCH:-/work/llama-cpp-build/bin/llama-bench}
NINFER=${NINFER:-$REPO/build-cu/bin/ninfer}
read -r -a NICE_CMD <<< "${NICE-nice -n 19}"
[[ -d $MODEL ]] || die "model directory not found: $MODEL (give --model DIR)"
MODEL=$(cd "$MODEL" && pwd)
[[ -f $MODEL/config.json ]] || die "$MODEL has no config.json: not a Hugging Face model directory"
ls "$MODEL"/*.safetensors >/dev/null 2>&1 || die "$MODEL has no .safetensors weights"
NAME=$(basename "$MODEL")
GGUF=${GGUF:-/work/llama-cpp-build/models/$NAME-bf16.gguf}

if [[ $ONLY != ninfer ]]; then
  if [[ ! -x $LLAMA_BENCH ]]; then
    die "llama-bench not found at $LLAMA_BENCH.
  Build llama.cpp's llama-bench (CPU only, outside this repo) and point LLAMA_BENCH at it,
  or run with --only ninfer."
  fi
  "$LLAMA_BENCH" --help >/dev/null 2>&1 || die "$LLAMA_BENCH does not run (try: $LLAMA_BENCH --help)"
  "$LLAMA_BENCH" --help 2>&1 | grep -q -- '--n-depth' ||
    die "$LLAMA_BENCH has no -d/--n-depth option (llama.cpp older than mid 2025): decode at depth 2048 cannot be measured"
fi
if [[ $ONLY != llama ]]; then
  [[ -x $NINFER ]] || die "ninfer not found at $NINFER (build the project, or set NINFER)"
fi

RAW=${OUT%.json}.raw
rm -rf "$RAW"; mkdir -p "$RAW"
CMDS=$RAW/commands.txt; : > "$CMDS"
run() {  # run LOGFILE CMD...: log the command, run it niced, stdout to LOGFILE.out, stderr to LOGFILE.err
  local log=$1; shift
  printf '%q ' "${NICE_CMD[@]}" "$@" >> "$CMDS"; echo >> "$CMDS"
  local rc=0
  "${NICE_CMD[@]}" "$@" > "$log.out" 2> "$log.err" || rc=$?
  echo "$rc" > "$log.rc"
  return "$rc"
}

# The ninfer binary may be rebuilt while this runs: every round uses one copy taken now.
if [[ $ONLY != llama ]]; then
  NINFER_SRC=$NINFER
  cp "$NINFER_SRC" "$RAW/ninfer.bin" || die "cannot copy $NINFER_SRC"
  NINFER=$RAW/ninfer.bin
  { echo "ninfer: $NINFER_SRC"; stat -c 'mtime: %y' "$NINFER_SRC"; sha256sum "$NINFER" | cut -c1-64; } \
    > "$RAW/ninfer_binary.txt"
fi

# ---- the GGUF (cached)
if [[ $ONLY != ninfer ]]; then
  newest=$(ls -t "$MODEL"/*.safetensors "$MODEL"/config.json "$MODEL"/tokenizer.json "$HERE/hf_to_gguf.py" | head -1)
  if [[ ! -s $GGUF || $newest -nt $GGUF ]]; then
    mkdir -p "$(dirname "$GGUF")"
    echo "converting $MODEL -> $GGUF" >&2
    run "$RAW/convert" python3 "$HERE/hf_to_gguf.py" "$MODEL" "$GGUF" ||
      die "conversion failed: $(tail -3 "$RAW/convert.err")"
  fi
fi

# Rounds are the outer loop: round r runs every configuration of both engines once, so a
# change in the machine's load during the run hits both engines alike (the median is over rounds).
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "load before: $(load)" > "$RAW/load.txt"
if awk '{exit !($1 > 0.5)}' /proc/loadavg; then
  echo "warning: load average $(load) before the run: other work on the cores makes the numbers noisy" >&2
fi
t_start=$(date +%s)
fail() {  # fail LOGBASE: say which command failed and how
  local rc; rc=$(cat "$1.rc" 2>/dev/null || echo '?')
  local how="exit $rc"; [[ $rc =~ ^[0-9]+$ ]] && ((rc > 128)) && how+=" (signal $((rc - 128)))"
  echo "  failed, $how: $(basename "$1"): $(tail -2 "$1.err" | tr '\n' ' ')" >&2
}
for r in $(seq 1 "$REPS"); do
  echo "round $r/$REPS (load $(load))" >&2
  if [[ $ONLY != ninfer ]]; then
    for kvfa in $LLAMA_KV; do
      kv=${kvfa%%:*} fa=${kvfa##*:}
      tag=$RAW/llama_${kv}_fa${fa}
      # pp512 + tg64 at depth 0; tg64 at depth 2048 (a separate call, so no pp512 at depth 2048)
      run "${tag}_d0_r$r" "$LLAMA_BENCH" -m "$GGUF" -t "$THREADS" -p "$PROMPT" -n "$GEN" -d 0 \
          -ctk "$kv" -ctv "$kv" -fa "$fa" -r 1 -o json || fail "${tag}_d0_r$r"
      run "${tag}_d${DEPTH}_r$r" "$LLAMA_BENCH" -m "$GGUF" -t "$THREADS" -p 0 -n "$GEN" -d "$DEPTH" \
          -ctk "$kv" -ctv "$kv" -fa "$fa" -r 1 -o json || fail "${tag}_d${DEPTH}_r$r"
    done
  fi
  if [[ $ONLY != llama ]]; then
    for kv in $NINFER_KV; do
      tag=$RAW/ninfer_${kv}
      run "${tag}_d0_r$r" "$NINFER" bench -m "$MODEL" --device cpu --threads "$THREADS" \
          --kv-dtype "$kv" --prompt "$PROMPT" --repeats 1 --gen "$GEN" --depth 0 --json || fail "${tag}_d0_r$r"
      run "${tag}_d${DEPTH}_r$r" "$NINFER" bench -m "$MODEL" --device cpu --threads "$THREADS" \
          --kv-dtype "$kv" --prompt 0 --gen "$GEN" --depth "$DEPTH" --json || fail "${tag}_d${DEPTH}_r$r"
    done
  fi
  echo "load after round $r: $(load)" >> "$RAW/load.txt"
done
echo "wall seconds: $(( $(date +%s) - t_start ))" >> "$RAW/load.txt"

python3 "$HERE/compare_report.py" --raw "$RAW" --out "$OUT" --model "$MODEL" --gguf "$GGUF" \
  --llama-bench "$LLAMA_BENCH" --ninfer "${NINFER_SRC:-$NINFER}" --repo "$REPO" --threads "$THREADS" \
  --prompt "$PROMPT" --gen "$GEN" --depth "$DEPTH" --llama-kv "$LLAMA_KV" --ninfer-kv "$NINFER_KV" \
  ${ONLY:+--only "$ONLY"}
