#!/usr/bin/env bash
# The supported-models table: every config.json under ../shared/real-configs through
# `ninfer kv-plan` (config only, no weights) at 141 GiB (one H200), one markdown row each:
# whether it loads, and the refusal message when it does not.
#   scripts/real_config_table.sh [BUILD_DIR] > table.md
set -uo pipefail
bin=${1:-build}/bin/ninfer
dir=$(dirname "$0")/../../shared/real-configs
echo "| checkpoint | architecture | outcome | rk2v4-e8 tokens at 141 GiB |"
echo "|---|---|---|---|"
for d in "$dir"/*/; do
  name=$(basename "$d")
  arch=$(python3 -c "import json,sys; c=json.load(open(sys.argv[1])); print(c.get('architectures',['?'])[0])" "$d/config.json" 2>/dev/null)
  out=$("$bin" kv-plan -m "$d" --memory 141GiB --kv-dtype rk2v4-e8 2>&1)
  if [ $? -eq 0 ]; then
    toks=$(echo "$out" | awk '$1 == "rk2v4-e8" {print $3}')
    # a head_dim the format cannot code: kv-plan says why instead of a count
    hd=$(echo "$out" | grep -o 'head_dim [0-9]* is not a multiple of [0-9]*')
    [ -n "$hd" ] && toks="- ($hd; f32 and bf16 only, bf16 on the GPU in 128-wide pages)"
    echo "| $name | $arch | loads | $toks |"
  else
    msg=$(echo "$out" | grep -m1 error: | sed -e 's/^error: //' -e "s|$d||; s|[^ ]*real-configs/[^/]*/||g" -e 's/ (supported:.*//' -e 's/^: //' -e 's/|/\\|/g' | cut -c1-160)
    echo "| $name | $arch | refused: $msg | - |"
  fi
done
