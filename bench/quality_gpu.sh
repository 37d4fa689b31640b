#!/usr/bin/env bash
# Issue 4's quality table on the GPU machine for one reference model (only one fits a call):
# perplexity + KL vs bf16 on sotu_dev and wikitext2_test (64 windows of 1024), then needle
# accuracy per format (lengths 512..4000, 40 trials each). Run after `gpu_session.sh build`.
#   bench/quality_gpu.sh MODEL_NAME [FORMATS]
# Models and corpora come from $NINFER_SHARED_DIR (default .carry/shared); JSON lines and logs
# go to $OUT (quality_<model>.jsonl, needle_<model>.jsonl).
set -u
MODEL=$1
FORMATS=${2:-int8,int4,rk4v4-e8,rk2v4-e8}
OUT=${OUT:-/tmp/ninfer_out}
SHARED=${NINFER_SHARED_DIR:-$(pwd)/.carry/shared}
BIN=${NINFER_BIN:-$(pwd)/build-gpu/bin/ninfer}
M=$SHARED/models/$MODEL
LENGTHS=${NEEDLE_LENGTHS:-512,1024,2048,3072,4000}
TRIALS=${NEEDLE_TRIALS:-40}
mkdir -p "$OUT"
for corpus in sotu_dev wikitext2_test; do
  echo "+ ninfer perplexity -m $MODEL -f $corpus.txt --device cuda --ctx 1024 --stride 1024 --max-windows 64 --kv-dtype $FORMATS --kl-ref bf16 --json"
  start=$(date +%s)
  timeout 300 "$BIN" perplexity -m "$M" -f "$SHARED/corpus/$corpus.txt" --device cuda --ctx 1024 --stride 1024 \
    --max-windows 64 --kv-dtype "$FORMATS" --kl-ref bf16 --json 2>> "$OUT/quality.log" |
    python3 -c "import json,sys; d=json.load(sys.stdin); [print(json.dumps(dict(r, corpus='$corpus', model='$MODEL', device='cuda'))) for r in (d if isinstance(d, list) else [d])]" \
    >> "$OUT/quality_$MODEL.jsonl"
  echo "perplexity $corpus exit ${PIPESTATUS[0]} ($(( $(date +%s) - start )) s)"
done
for f in bf16 $(echo "$FORMATS" | tr ',' ' '); do
  echo "+ ninfer needle -m $MODEL --device cuda --kv-dtype $f --lengths $LENGTHS --trials $TRIALS --json"
  start=$(date +%s)
  timeout 300 "$BIN" needle -m "$M" --device cuda --kv-dtype "$f" --lengths "$LENGTHS" --trials "$TRIALS" \
    --haystack "$SHARED/corpus/sotu_dev.txt" --json 2>> "$OUT/needle.log" |
    python3 -c "import json,sys; r=json.load(sys.stdin); r.update(model='$MODEL', device='cuda'); print(json.dumps(r))" \
    >> "$OUT/needle_$MODEL.jsonl"
  echo "needle $f exit ${PIPESTATUS[0]} ($(( $(date +%s) - start )) s)"; tail -1 "$OUT/needle_$MODEL.jsonl" | cut -c1-300
done
