#!/usr/bin/env bash
# The exact KV window of issue 30 (--kv-sink / --kv-recent): perplexity and KL against a bf16
# cache for each (sink, recent) setting, one JSON object per line (jq-friendly) appended to OUT.
#   bench/kv_window.sh MODEL_DIR CORPUS_FILE WINDOWS CTX OUT.jsonl "SINK:RECENT ..." [FORMATS]
# e.g. bench/kv_window.sh ../shared/models/ref-qwen3-d256 ../shared/corpus/sotu_dev.txt 64 1024 w.jsonl "0:0 4:128"
set -euo pipefail
BIN=${NINFER_BIN:-build/bin/ninfer}
MODEL=$1 CORPUS=$2 WINDOWS=$3 CTX=$4 OUT=$5 SETTINGS=$6 FORMATS=${7:-rk2v4-e8}
for s in $SETTINGS; do
  sink=${s%%:*} recent=${s##*:}
  "$BIN" perplexity -m "$MODEL" -f "$CORPUS" --ctx "$CTX" --stride "$CTX" --max-windows "$WINDOWS" \
    --kv-dtype "$FORMATS" --kl-ref bf16 --kv-sink "$sink" --kv-recent "$recent" --json 2>/dev/null |
    python3 -c 'import json,sys; d=json.load(sys.stdin); [print(json.dumps(x)) for x in (d if isinstance(d,list) else [d])]' >> "$OUT"
done
