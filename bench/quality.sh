#!/usr/bin/env bash
# Quality table of issue 4: perplexity + KL vs bf16 for every format, one model and corpus,
# windows of 1024 (golden.json's scheme). Writes JSON to OUT (default stdout).
#   bench/quality.sh MODEL_DIR CORPUS_FILE [WINDOWS] [OUT.json]
set -euo pipefail
BIN=${NINFER_BIN:-build/bin/ninfer}
MODEL=$1 CORPUS=$2 WINDOWS=${3:-64} OUT=${4:-/dev/stdout}
FORMATS=${FORMATS:-int8,fp8,nvfp4,k8v4,int4,rk4v4-e8,rk2v4-e8,e8-root-ref}
"$BIN" perplexity -m "$MODEL" -f "$CORPUS" --ctx 1024 --stride 1024 --max-windows "$WINDOWS" \
  --kv-dtype "$FORMATS" --kl-ref bf16 --json > "$OUT"
