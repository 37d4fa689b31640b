#!/bin/bash
# Prefill attention alone (a whole prompt as one causal chunk, batch 1) under several sets of
# environment switches, interleaved pass by pass so that drift hits every variant alike; rows go
# to $OUT/pvar.jsonl tagged with their variant, for bench/compare_prefill_attention.py.
#   bench/prefill_variants.sh "NAME=ENV1=0,ENV2=1" "NAME2=..." ...   (a NAME alone: no switches)
# PV_FORMATS (default bf16), PV_SHAPES (default "32/8/128 16/2/256"), PV_CTX (default
# "4096 32768"), PV_PASSES (default 2), PV_REPEATS (default 5); NINFER_BIN_DIR as gpu_session.sh.
set -u
OUT=${OUT:-/tmp/ninfer_out}
BIN=${NINFER_BIN_DIR:-$(pwd)/build-gpu/bin}
mkdir -p "$OUT"
: > "$OUT/pvar.jsonl"
for pass in $(seq 1 "${PV_PASSES:-2}"); do
  for v in "$@"; do
    name=${v%%=*}
    envs=()
    [ "$name" != "$v" ] && IFS=, read -r -a envs <<< "${v#*=}"
    for shp in ${PV_SHAPES:-32/8/128 16/2/256}; do
      hk=${shp%/*}; hd=${shp##*/}
      for n in ${PV_CTX:-4096 32768}; do
        env "${envs[@]}" timeout 300 "$BIN/ninfer" bench --attention --kv-dtype "${PV_FORMATS:-bf16}" --ctx "$n" \
          --queries "$n" --batch 1 --heads "$hk" --head-dim "$hd" --repeats "${PV_REPEATS:-5}" --json 2>> "$OUT/pvar.log" |
          python3 -c "import json,sys
for line in sys.stdin:
    if line.startswith('{'):
        d = json.loads(line)
        for r in d['rows']:
            r['variant'] = '$name'; r['pass'] = $pass
        print(json.dumps(d))" >> "$OUT/pvar.jsonl"
        echo "pass $pass $name $shp $n exit ${PIPESTATUS[0]}" >> "$OUT/pvar.log"
      done
    done
  done
done
