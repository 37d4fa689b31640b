#!/bin/bash
# One GPU session on a fresh machine, from the repository root (see docs/GPU.md):
#   bench/gpu_session.sh STAGE...      stages: build prebuilt test ptest retest attn attnenv ab pipes splits pattn psdpa sdpa e2e e2ec e2eb ctxmax serve serve8b pending quant ncu ncuc ncub1 pack
# build: configure + build test_cuda and ninfer (sm_90) in build-gpu, with the C++
#        dependencies taken from .carry/deps.tgz when the machine lacks them
# test:  ctest -L gpu equivalent (test_cuda, all tests), log to $OUT/test.log
# ptest: the sm_90 prefill kernel's tests (test_prefill_attention.cpp), bf16 first, short timeouts
# attn:  ninfer bench --attention, formats x shapes x ctx x batch -> $OUT/attn.jsonl (a process
#        per shape and format; ATTN_ONE_PROCESS=1: one per shape)
#        (ATTN_FORMATS, default bf16,int8; ATTN_SHAPES, default "32/8/128 16/2/256 24/4/256";
#        ATTN_CTX, default 8192,32768,131072; ATTN_BATCH, default 1,8; ATTN_COLD=1: --cold-l2, the
#        L2 overwritten before each repeat, here and in sdpa; ATTN_GRAPH=1: --graph, CUDA-graph
#        replays of 20 steps, here and in sdpa)
# ab:    A/B of two carried ninfer binaries (AB_A, AB_B), AB_PASSES passes of attn each,
#        alternating -> $OUT/ab_{a,b}.jsonl and bench/ab_attention.py's table ($OUT/ab.txt)
# sdpa:  PyTorch SDPA on the same shapes -> $OUT/sdpa.json, then the comparison tables
#        (bench/compare_attention.py: bf16/int8; bench/compare_compressed_attention.py: every
#        format vs SDPA, with the copy bandwidth; also for attnenv's rows when it ran first)
# pattn: prefill attention alone (a whole prompt as one chunk), PATTN_FORMATS, PATTN_SHAPES,
#        PATTN_CTX (defaults at the stage), batch 1 -> $OUT/pattn.jsonl
# psdpa: PyTorch SDPA flash / cuDNN on pattn's shapes -> $OUT/sdpa_prefill.json and the table
# e2e:   random Llama-3-8B checkpoint, end-to-end prefill/decode bench -> $OUT/e2e.txt
# quant: quantised weights (issue 27): their GPU tests, then the same random checkpoint with
#        --weights bf16|fp8|int4|int8 at batch 1 and 8 (prefill 4K, decode vs the limit) -> $OUT/quant.txt
# e2ec:  the same random checkpoint, decode at 32K depth with each of E2E_FORMATS (default
#        bf16,int8,int4,rk4v4-e8,rk2v4-e8) -> $OUT/e2e.txt
# long:  the same random checkpoint (LONG_CONFIG: random weights of that config.json's shape
#        instead), one LONG_PROMPT-token prompt (default 1048576) with
#        LONG_FORMAT (default rk2v4-e8) prefilled once in LONG_CHUNK chunks (default 8192), then 32
#        decode steps on it (bench --once: wall time and peak memory) -> $OUT/long.txt
# ctxmax: the same random checkpoint, for each of E2E_FORMATS and each of CTX_BUDGETS (default
#        "24GiB 32GiB"): the largest context the budget holds, allocated and decoded at
#        (bench --memory-budget B --max-depth --fill-from 4096 --chunk 1024) -> $OUT/ctxmax.txt
# serve: `ninfer serve --device cuda` on SERVE_MODEL (default ref-qwen3-d256) under
#        server_loadgen (16 clients, then 1) -> $OUT/serve.txt
# ncu:   Nsight Compute sections of one bf16 decode-attention launch -> $OUT/ncu.txt
# Models come from $NINFER_SHARED_DIR (default .carry/shared). Everything logs under $OUT.
set -u
OUT=${OUT:-/tmp/ninfer_out}
ATTN_FORMATS=${ATTN_FORMATS:-bf16,int8}
ATTN_SHAPES=${ATTN_SHAPES:-32/8/128 16/2/256 24/4/256}
ATTN_CTX=${ATTN_CTX:-8192,32768,131072}
ATTN_BATCH=${ATTN_BATCH:-1,8}
PIPE_FORMATS=${PIPE_FORMATS:-int4,rk4v4-e8,rk2v4-e8}
TIMING="${ATTN_COLD:+--cold-l2} ${ATTN_GRAPH:+--graph}"  # the attention timing mode, ours and SDPA's alike
mkdir -p "$OUT"
ROOT=$(pwd)
export NINFER_SHARED_DIR=${NINFER_SHARED_DIR:-$ROOT/.carry/shared}
DEPS=/tmp/ninfer_deps
if [ -f .carry/deps.tgz ] && [ ! -d "$DEPS" ]; then mkdir -p "$DEPS" && tar xzf .carry/deps.tgz -C "$DEPS"; fi
export LD_LIBRARY_PATH="$DEPS/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PKG_CONFIG_LIBDIR="$DEPS/usr/lib/x86_64-linux-gnu/pkgconfig:$DEPS/usr/share/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$DEPS"
PKGCONF=$(command -v pkg-config || echo "$DEPS/usr/bin/pkgconf")
export CUDACXX=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
BIN=${NINFER_BIN_DIR:-$ROOT/build-gpu/bin}  # NINFER_BIN_DIR: another build's bin (A/B of two binaries in one call)
stamp() { echo "=== $(date +%T) $*" | tee -a "$OUT/session.log"; }

for stage in "$@"; do
  case $stage in
  build)
    stamp build
    nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv >> "$OUT/session.log" 2>&1
    (cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DNINFER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DCMAKE_PREFIX_PATH="$DEPS/usr" -DPKG_CONFIG_EXECUTABLE="$PKGCONF" -DNINFER_SHARED_DIR="$NINFER_SHARED_DIR" \
      && ninja -C build-gpu -j16 test_cuda ninfer server_loadgen) > "$OUT/build.log" 2>&1
    rc=$?
    grep -E "error|warning: .*cuda|spill" "$OUT/build.log" | head -40
    if [ $rc -ne 0 ]; then tail -60 "$OUT/build.log"; stamp "build FAILED"; exit 1; fi
    stamp "build ok" ;;
  prebuilt)
    # Bench-only calls without the build: ninfer (and test_cuda when there) built on the CPU
    # machine with -DCMAKE_CUDA_ARCHITECTURES=90 in build-cu and carried (`carry` build-cu/bin/ninfer);
    # falls back to the build stage when it does not run here (libraries, glibc).
    stamp prebuilt
    mkdir -p "$BIN" && cp build-cu/bin/ninfer* build-cu/bin/test_cuda "$BIN/" 2>/dev/null
    # (a call that carries only test_cuda, or only another ninfer-* for NINFER_BIN_DIR, checks
    # that one instead)
    alt=$(ls "$BIN"/ninfer-* 2> /dev/null | head -1)
    if [ -x "$BIN/ninfer" ]; then probe=("$BIN/ninfer" --help)
    elif [ -x "$BIN/test_cuda" ]; then probe=("$BIN/test_cuda" --gtest_list_tests)
    elif [ -n "$alt" ]; then probe=("$alt" --help)
    else probe=("$BIN/ninfer" --help); fi
    if "${probe[@]}" > /dev/null 2>> "$OUT/session.log"; then stamp "prebuilt ${probe[0]##*/} runs"
    else stamp "prebuilt ${probe[0]##*/} does not run: building"; bash "$0" build || exit 1; fi ;;
  test)
    stamp test
    timeout 400 "$BIN/test_cuda" --gtest_color=no > "$OUT/test.log" 2>&1
    echo "test_cuda exit $?" | tee -a "$OUT/session.log"
    grep -E "^\[  (PASSED|FAILED) " "$OUT/test.log" >> "$OUT/session.log"
    grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[ (attn|golden|int8|int4|rk|fp8|nvfp4|k8v4)|Failure|error:|Expected|Which is|actual|got " "$OUT/test.log" | head -120 ;;
  ptest)
    # The sm_90 prefill kernel's tests alone, bf16 first, each group under a short timeout (a
    # hang there would otherwise take the rest of the call) -> $OUT/ptest.log
    stamp ptest
    : > "$OUT/ptest.log"
    for f in 'Cases/PrefillAttentionTest.*/bf16_*' 'Cases/PrefillAttentionTest.*:PrefillAttentionProps.*'; do
      timeout ${PTEST_TIMEOUT:-180} "$BIN/test_cuda" --gtest_filter="$f" --gtest_color=no >> "$OUT/ptest.log" 2>&1
      echo "prefill tests '$f' exit $?" | tee -a "$OUT/session.log"
    done
    grep -E "^\[ prefill|^\[  (FAILED|PASSED) |Failure|Expected" "$OUT/ptest.log" | head -100 ;;
  attn)
    # One process per shape and format (a server runs one format): in one process, rk2v4-e8's
    # batch-1 rows ran ~3 % slower after another format's rows with ~1 GB of pools or more
    # (docs/BENCHMARKS.md, session 14). ATTN_ONE_PROCESS=1: every format of a shape in one
    # process, as before.
    stamp attn
    : > "$OUT/attn.jsonl"
    for shape in $ATTN_SHAPES; do
      IFS=/ read -r hq hkv d <<< "$shape"
      groups=$(if [ -n "${ATTN_ONE_PROCESS:-}" ]; then echo "$ATTN_FORMATS"; else echo "$ATTN_FORMATS" | tr ',' ' '; fi)
      for fmts in $groups; do
        echo "+ ninfer bench --attention --kv-dtype $fmts --ctx $ATTN_CTX --batch $ATTN_BATCH --heads $hq/$hkv --head-dim $d --json $TIMING" >> "$OUT/bench.log"
        timeout 300 "$BIN/ninfer" bench --attention --kv-dtype "$fmts" --ctx "$ATTN_CTX" --batch "$ATTN_BATCH" \
          --heads "$hq/$hkv" --head-dim "$d" --json $TIMING > "$OUT/attn_tmp.txt" 2>> "$OUT/bench.log"
        echo "attention $shape $fmts exit $?"; grep -v "^{" "$OUT/attn_tmp.txt"; grep "^{" "$OUT/attn_tmp.txt" >> "$OUT/attn.jsonl"
      done
    done
    rm -f "$OUT/attn_tmp.txt" ;;
  pipes)
    # The loop variants of the register decode kernel (NINFER_CUDA_COMP_PIPE 1..3; 0, the
    # default, is in attn) on PIPE_FORMATS -> $OUT/pipes.jsonl (a "pipe" field added)
    stamp pipes
    : > "$OUT/pipes.jsonl"
    for pipe in ${PIPES:-1 2 3}; do
      for shape in 32/8/128 16/2/256; do
        IFS=/ read -r hq hkv d <<< "$shape"
        echo "+ NINFER_CUDA_COMP_PIPE=$pipe ninfer bench --attention --kv-dtype $PIPE_FORMATS --ctx 32768,131072 --batch 1,8 --heads $hq/$hkv --head-dim $d --json" >> "$OUT/bench.log"
        NINFER_CUDA_COMP_PIPE=$pipe timeout 200 "$BIN/ninfer" bench --attention --kv-dtype "$PIPE_FORMATS" \
          --ctx 32768,131072 --batch 1,8 --heads "$hq/$hkv" --head-dim "$d" --json 2>> "$OUT/bench.log" \
          | grep "^{" | sed "s/^{/{\"pipe\":$pipe,/" >> "$OUT/pipes.jsonl"
        echo "pipes $pipe $shape exit $?"
      done
    done ;;
  attnenv)
    # attn's table again with the environment ATTN_ENV (e.g. NINFER_CUDA_COMP_PIPE=2)
    # -> $OUT/attn_env.jsonl (an "env" field added)
    stamp "attnenv $ATTN_ENV"
    : > "$OUT/attn_env.jsonl"
    for shape in $ATTN_SHAPES; do
      IFS=/ read -r hq hkv d <<< "$shape"
      echo "+ $ATTN_ENV ninfer bench --attention --kv-dtype $ATTN_FORMATS --ctx $ATTN_CTX --batch $ATTN_BATCH --heads $hq/$hkv --head-dim $d --json $TIMING" >> "$OUT/bench.log"
      env $ATTN_ENV timeout 200 "$BIN/ninfer" bench --attention --kv-dtype "$ATTN_FORMATS" --ctx "$ATTN_CTX" \
        --batch "$ATTN_BATCH" --heads "$hq/$hkv" --head-dim "$d" --json $TIMING 2>> "$OUT/bench.log" \
        | grep "^{" | sed "s/^{/{\"env\":\"$ATTN_ENV\",/" >> "$OUT/attn_env.jsonl"
      echo "attnenv $shape exit $?"
    done ;;
  splits)
    # batch-1 decode attention with the KV splits forced (bench --attention --splits): where the
    # per-CTA fixed cost of many short splits shows (SPLIT_FORMATS, SPLITS) -> $OUT/splits.jsonl
    stamp splits
    : > "$OUT/splits.jsonl"
    for shape in 16/2/256 32/8/128; do
      IFS=/ read -r hq hkv d <<< "$shape"
      args="--attention --kv-dtype ${SPLIT_FORMATS:-bf16,rk4v4-e8,rk2v4-e8} --ctx 32768,131072 --batch 1 --heads $hq/$hkv --head-dim $d --splits ${SPLITS:-16,32,64,128} --json $TIMING"
      echo "+ ninfer bench $args" >> "$OUT/bench.log"
      timeout 200 "$BIN/ninfer" bench $args 2>> "$OUT/bench.log" | tee -a "$OUT/bench.log" | grep "^{" >> "$OUT/splits.jsonl"
      echo "splits $shape exit $?"
    done ;;
  retest)
    # test_cuda again with the environment RETEST_ENV and the filter RETEST_FILTER -> $OUT/retest.log
    stamp "retest $RETEST_ENV $RETEST_FILTER"
    env $RETEST_ENV timeout 300 "$BIN/test_cuda" --gtest_color=no --gtest_filter="$RETEST_FILTER" > "$OUT/retest.log" 2>&1
    echo "test_cuda ($RETEST_ENV) exit $?" | tee -a "$OUT/session.log"
    grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure" "$OUT/retest.log" | head -40 ;;
  ab)
    # A/B of two ninfer builds (AB_A, AB_B: paths of the binaries, e.g. build-cu/bin/ninfer-base
    # and build-cu/bin/ninfer carried with `prebuilt`), AB_PASSES passes (default 2) of attn for
    # each, alternating, with the timing of ATTN_GRAPH / ATTN_COLD -> $OUT/ab_{a,b}.jsonl and
    # bench/ab_attention.py's table (B / A per row, each build's spread between its passes)
    stamp "ab $AB_A $AB_B"
    : > "$OUT/ab_a.jsonl"; : > "$OUT/ab_b.jsonl"
    for side in a b; do
      src=$([ $side = a ] && echo "${AB_A:?AB_A: the A binary}" || echo "${AB_B:?AB_B: the B binary}")
      mkdir -p "/tmp/ab_$side" && cp "$src" "/tmp/ab_$side/ninfer" || exit 1
    done
    for pass in $(seq "${AB_PASSES:-2}"); do
      for side in a b; do
        NINFER_BIN_DIR=/tmp/ab_$side OUT="$OUT/ab_${side}_$pass" bash "$0" attn > /dev/null
        cat "$OUT/ab_${side}_$pass/attn.jsonl" >> "$OUT/ab_$side.jsonl"
      done
    done
    python3 bench/ab_attention.py "$OUT/ab_a.jsonl" "$OUT/ab_b.jsonl" | tee "$OUT/ab.txt" ;;
  pattn)
    # PATTN_FORMATS (default ATTN_FORMATS), PATTN_SHAPES (default "32/8/128 16/2/256"), PATTN_CTX
    # (default "4096 32768"), PATTN_REPEATS (default 3; rows of 16K+ tokens take it as given)
    stamp pattn
    [ -n "${PATTN_APPEND:-}" ] || : > "$OUT/pattn.jsonl"  # PATTN_APPEND=1: add to an earlier pattn's rows
    for shp in ${PATTN_SHAPES:-32/8/128 16/2/256}; do
      hk=${shp%/*}; hd=${shp##*/}
      for n in ${PATTN_CTX:-4096 32768}; do
        cmd=("$BIN/ninfer" bench --attention --kv-dtype "${PATTN_FORMATS:-$ATTN_FORMATS}" --ctx $n --queries $n --batch 1
             --heads $hk --head-dim $hd --repeats ${PATTN_REPEATS:-3} --json)
        echo "+ ${cmd[*]}" >> "$OUT/bench.log"
        timeout 300 "${cmd[@]}" > "$OUT/attn_tmp.txt" 2>> "$OUT/bench.log"
        echo "prefill attention $shp $n exit $?"; grep -v "^{" "$OUT/attn_tmp.txt"; grep "^{" "$OUT/attn_tmp.txt" >> "$OUT/pattn.jsonl"
      done
    done
    rm -f "$OUT/attn_tmp.txt" ;;
  psdpa)
    # PyTorch SDPA (flash, cuDNN) on pattn's shapes and prompts -> $OUT/sdpa_prefill.json, then
    # the comparison table against pattn's rows (bench/compare_prefill_attention.py)
    stamp psdpa
    shapes_csv=$(echo ${PATTN_SHAPES:-32/8/128 16/2/256} | tr ' ' ','); ctx_csv=$(echo ${PATTN_CTX:-4096 32768} | tr ' ' ',')
    echo "+ python3 bench/sdpa_prefill_attention.py --shapes $shapes_csv --ctx $ctx_csv" >> "$OUT/bench.log"
    PYTHONUNBUFFERED=1 timeout 300 python3 bench/sdpa_prefill_attention.py --shapes "$shapes_csv" --ctx "$ctx_csv" \
      --json "$OUT/sdpa_prefill.json" 2>&1 | tee -a "$OUT/bench.log"
    python3 bench/compare_prefill_attention.py "$OUT/sdpa_prefill.json" "$OUT/pattn.jsonl" | tee -a "$OUT/bench.log" ;;
  sdpa)
    stamp sdpa
    shapes_csv=$(echo $ATTN_SHAPES | tr ' ' ',')
    echo "+ python3 bench/sdpa_decode_attention.py --shapes $shapes_csv --ctx $ATTN_CTX --batch $ATTN_BATCH $TIMING" >> "$OUT/bench.log"
    timeout 300 python3 bench/sdpa_decode_attention.py --shapes "$shapes_csv" --ctx "$ATTN_CTX" \
      --batch "$ATTN_BATCH" --json "$OUT/sdpa.json" $TIMING >> "$OUT/bench.log" 2>&1
    echo "sdpa exit $?"
    python3 bench/compare_attention.py "$OUT/sdpa.json" "$OUT/attn.jsonl" | tee -a "$OUT/bench.log"
    python3 bench/compare_compressed_attention.py "$OUT/sdpa.json" "$OUT/attn.jsonl" | tee -a "$OUT/bench.log"
    if [ -s "$OUT/attn_env.jsonl" ]; then  # attnenv ran before: its table against the same SDPA
      echo "--- with ${ATTN_ENV:-}:" | tee -a "$OUT/bench.log"
      python3 bench/compare_compressed_attention.py "$OUT/sdpa.json" "$OUT/attn_env.jsonl" | tee -a "$OUT/bench.log"
    fi ;;
  e2e)
    stamp e2e
    CK=/tmp/llama3-8b-random
    [ -f $CK/model.safetensors ] || timeout 200 "$BIN/ninfer" make-random-checkpoint -o $CK \
        --tokenizer-from "$NINFER_SHARED_DIR/models/stories260k" 2>&1 | tail -2
    run_e2e() {  # label, env, args...
      local label=$1 envs=$2; shift 2
      echo "--- $label: $envs ninfer bench $*" >> "$OUT/e2e.txt"
      env $envs timeout 240 "$BIN/ninfer" bench -m $CK --device cuda --json "$@" >> "$OUT/e2e.txt" 2>&1
      echo "e2e $label exit $?"; tail -5 "$OUT/e2e.txt"
    }
    run_e2e short-bf16 "NINFER_CUDA_GEMV=1" --prompt 4096 --gen 64 --depth 128 --repeats 3 --chunk 4096
    run_e2e 32k-bf16 "NINFER_CUDA_GEMV=1" --prompt 32768 --gen 64 --depth 32768 --repeats 1 --chunk 8192
    run_e2e 32k-int8 "NINFER_CUDA_GEMV=1" --kv-dtype int8 --prompt 0 --gen 64 --depth 32768 --chunk 8192
    stamp "e2e done" ;;
  quant)
    # Issue 27's CUDA half (written 2026-12-07 without a GPU): the quantised-weight kernels' tests,
    # then e2e's random 8B checkpoint with --weights bf16|fp8|int8|int4: prefill of a 4K prompt and
    # decode at batch 1 and 8 against the bandwidth limit (real weight bytes); fp8 prefill again
    # with the FP8 GEMM off (bf16 tiles) -> $OUT/quant.txt
    stamp quant
    timeout 300 "$BIN/test_cuda" --gtest_color=no --gtest_filter='*CudaGemvQuant*:*CudaQuant*' \
      > "$OUT/quant_tests.log" 2>&1
    echo "quant tests exit $?" | tee -a "$OUT/session.log"
    grep -E "^\[  (PASSED|FAILED)|^\[  FAILED|Failure|Expected|Which is|^quant " "$OUT/quant_tests.log" | head -60
    CK=/tmp/llama3-8b-random
    [ -f $CK/model.safetensors ] || timeout 200 "$BIN/ninfer" make-random-checkpoint -o $CK \
        --tokenizer-from "$NINFER_SHARED_DIR/models/stories260k" 2>&1 | tail -2
    for w in bf16 fp8 int4 int8; do  # one engine per --weights (bench --batch takes a list)
      echo "--- --weights $w" >> "$OUT/quant.txt"
      timeout 300 "$BIN/ninfer" bench -m $CK --device cuda --weights $w --kv-dtype bf16 --prompt 4096 --gen 64 \
        --depth 128 --batch 1,8 --repeats 3 --chunk 4096 >> "$OUT/quant.txt" 2>&1
      echo "quant $w exit $?"; tail -6 "$OUT/quant.txt"
    done
    echo "--- --weights fp8, NINFER_CUDA_FP8_GEMM=0" >> "$OUT/quant.txt"
    NINFER_CUDA_FP8_GEMM=0 timeout 300 "$BIN/ninfer" bench -m $CK --device cuda --weights fp8 --kv-dtype bf16 \
      --prompt 4096 --gen 16 --depth 128 --repeats 3 --chunk 4096 >> "$OUT/quant.txt" 2>&1
    echo "quant fp8 no-fp8-gemm exit $?"; tail -4 "$OUT/quant.txt"
    stamp "quant done" ;;
  long)
    stamp long
    if [ -n "${LONG_CONFIG:-}" ]; then
      model=(-m "$LONG_CONFIG" --random-weights 1)
    else
      CK=/tmp/llama3-8b-random
      [ -f $CK/model.safetensors ] || timeout 200 "$BIN/ninfer" make-random-checkpoint -o $CK \
          --tokenizer-from "$NINFER_SHARED_DIR/models/stories260k" 2>&1 | tail -2
      model=(-m $CK)
    fi
    args=(bench "${model[@]}" --device cuda --json --once --kv-dtype "${LONG_FORMAT:-rk2v4-e8}" --prompt "${LONG_PROMPT:-1048576}"
          --gen 32 --chunk "${LONG_CHUNK:-8192}")
    echo "--- ninfer ${args[*]}" >> "$OUT/long.txt"
    ( while sleep 20; do nvidia-smi --query-gpu=memory.used --format=csv,noheader >> "$OUT/long_mem.txt"; done ) &
    mon=$!
    timev=(); [ -x /usr/bin/time ] && timev=(/usr/bin/time -v)
    "${timev[@]}" timeout "${LONG_TIMEOUT:-560}" "$BIN/ninfer" "${args[@]}" >> "$OUT/long.txt" 2>&1
    echo "long exit $?"; kill $mon
    grep "^prefill [0-9]" "$OUT/long.txt" | awk 'NR % 60 == 1' | tail -12
    grep -v "^prefill [0-9]" "$OUT/long.txt" | tail -25; tail -3 "$OUT/long_mem.txt"
    stamp "long done" ;;
  e2ec)
    stamp e2ec
    CK=/tmp/llama3-8b-random
    [ -f $CK/model.safetensors ] || timeout 200 "$BIN/ninfer" make-random-checkpoint -o $CK \
        --tokenizer-from "$NINFER_SHARED_DIR/models/stories260k" 2>&1 | tail -2
    for f in $(echo "${E2E_FORMATS:-bf16,int8,int4,rk4v4-e8,rk2v4-e8}" | tr ',' ' '); do
      echo "--- $f: ninfer bench -m $CK --device cuda --json --kv-dtype $f --prompt 0 --gen 64 --depth 32768 --chunk 8192" >> "$OUT/e2e.txt"
      timeout 150 "$BIN/ninfer" bench -m $CK --device cuda --json --kv-dtype "$f" --prompt 0 --gen 64 --depth 32768 \
        --chunk 8192 >> "$OUT/e2e.txt" 2>&1
      echo "e2e $f exit $?"; tail -4 "$OUT/e2e.txt"
    done
    stamp "e2ec done" ;;
  e2eb)
    # Batched decode at 32K depth (issue 28): per format of E2E_FORMATS, one process (one weight
    # upload) decodes each of E2EB_BATCHES (default 1,8,32,64,128,max; max: the most sequences
    # the pool holds) at E2EB_DEPTH (default 32768), the depth reached by repeating the pages of
    # a 1024-token prefill; random weights of E2EB_CONFIG's shape (default the Llama-3.1-8B
    # config under .carry/configs) -> $OUT/e2eb.jsonl and bench/batch_table.py's table.
    stamp e2eb
    cfg=${E2EB_CONFIG:-$ROOT/.carry/configs/Llama-3.1-8B}
    : > "$OUT/e2eb.jsonl"
    for f in $(echo "${E2E_FORMATS:-bf16,int8,int4,rk4v4-e8,rk2v4-e8}" | tr ',' ' '); do
      args="--kv-dtype $f --prompt 0 --gen 32 --depth ${E2EB_DEPTH:-32768} --fill-from 1024 --chunk 1024 --batch ${E2EB_BATCHES:-1,8,32,64,128,max}"
      echo "+ ninfer bench -m $cfg --random-weights 1 --device cuda --json $args" >> "$OUT/bench.log"
      timeout "${E2EB_TIMEOUT:-200}" "$BIN/ninfer" bench -m "$cfg" --random-weights 1 --device cuda --json $args \
        > "$OUT/e2eb_tmp.txt" 2>> "$OUT/bench.log"
      echo "e2eb $f exit $?"; grep "^{" "$OUT/e2eb_tmp.txt" >> "$OUT/e2eb.jsonl"
    done
    rm -f "$OUT/e2eb_tmp.txt"
    python3 bench/batch_table.py "$OUT/e2eb.jsonl" | tee "$OUT/e2eb_table.txt"
    stamp "e2eb done" ;;
  ctxmax)
    stamp ctxmax
    CK=/tmp/llama3-8b-random
    [ -f $CK/model.safetensors ] || timeout 200 "$BIN/ninfer" make-random-checkpoint -o $CK \
        --tokenizer-from "$NINFER_SHARED_DIR/models/stories260k" 2>&1 | tail -2
    for budget in ${CTX_BUDGETS:-24GiB 32GiB}; do
      for f in $(echo "${E2E_FORMATS:-bf16,int8,int4,rk4v4-e8,rk2v4-e8}" | tr ',' ' '); do
        args="--kv-dtype $f --memory-budget $budget --max-depth --fill-from 4096 --prompt 0 --gen 16 --chunk 1024"
        echo "--- $f $budget: ninfer bench -m $CK --device cuda --json $args" >> "$OUT/ctxmax.txt"
        timeout 150 "$BIN/ninfer" bench -m $CK --device cuda --json $args >> "$OUT/ctxmax.txt" 2>&1
        echo "ctxmax $f $budget exit $?"; grep -E "^capacity|^decode" "$OUT/ctxmax.txt" | tail -2
      done
    done
    stamp "ctxmax done" ;;
  serve)
    stamp serve
    M=$NINFER_SHARED_DIR/models/${SERVE_MODEL:-ref-qwen3-d256}
    "$BIN/ninfer" serve -m "$M" --device cuda --port 0 --max-context 1024 --max-concurrency 16 --no-request-log \
      2> "$OUT/serve_stderr.txt" &
    spid=$!
    port=""
    for i in $(seq 1 60); do
      port=$(grep -o "listening on http://[^ ]*" "$OUT/serve_stderr.txt" | sed 's/.*://'); [ -n "$port" ] && break; sleep 1
    done
    echo "serve port ${port:-none}"
    if [ -n "$port" ]; then
      for spec in "300 16 32" "60 1 32" "200 16 64 --ignore-eos" "24 1 64 --ignore-eos"; do
        read -r nreq conc maxt extra <<< "$spec"
        echo "--- server_loadgen --requests $nreq --concurrency $conc --max-tokens $maxt $extra" >> "$OUT/serve.txt"
        timeout 120 "$ROOT/build-gpu/bin/server_loadgen" --port "$port" --requests $nreq --concurrency $conc \
          --max-tokens $maxt $extra >> "$OUT/serve.txt" 2>&1
        echo "loadgen $spec exit $?"; tail -3 "$OUT/serve.txt"
      done
    fi
    kill $spid; wait $spid 2>/dev/null
    stamp "serve done" ;;
  pending)
    # What the 2026-12-07 sessions wrote without a GPU (none could be started): the head_dim-96
    # padding, the fused decode GEMVs (NINFER_CUDA_FUSE_*, off by default), the sm_90 prefill
    # ping-pong / three-stage ring (off by default) and the quantised-weight kernels (the
    # `quant` stage benches them). Their tests first, then the A/Bs that decide
    # the defaults: prefill variants against SDPA cuDNN, MoE decode with the fusions off and on
    # (PENDING_MOE: a config directory, e.g. Qwen3-30B-A3B cut to 12 layers, with a tokenizer.json).
    stamp pending
    timeout 200 "$BIN/test_cuda" --gtest_color=no \
      --gtest_filter='*HeadPad*:*Tiny*:*HeadDim*:*GemvFused*:*FusionsChangeNoBit*:CudaOps*:*CudaGemvQuant*:*CudaQuant*' \
      > "$OUT/pending_tests.log" 2>&1
    echo "pending tests exit $?" | tee -a "$OUT/session.log"
    grep -E "^\[  (PASSED|FAILED)|^\[  FAILED|Failure|Expected|Which is" "$OUT/pending_tests.log" | head -30
    NINFER_CUDA_PREFILL_PIPE=1 NINFER_CUDA_PREFILL_PINGPONG=1 NINFER_CUDA_PREFILL_DEEP=1 bash "$0" ptest
    P=NINFER_CUDA_PREFILL_PIPE=1,NINFER_CUDA_PREFILL_PINGPONG=1
    PV_PASSES=2 NINFER_BIN_DIR="$BIN" bash bench/prefill_variants.sh base pipe=NINFER_CUDA_PREFILL_PIPE=1 pp=$P \
      ppd=$P,NINFER_CUDA_PREFILL_DEEP=1
    PATTN_SHAPES="32/8/128 16/2/256" PATTN_CTX="4096 32768" bash "$0" psdpa > /dev/null 2>&1
    python3 bench/compare_prefill_attention.py "$OUT/sdpa_prefill.json" "$OUT/pvar.jsonl" | tee "$OUT/pvar_table.txt"
    if [ -n "${PENDING_MOE:-}" ]; then
      for f in 0 1; do
        NINFER_CUDA_FUSE_NORM=$f NINFER_CUDA_FUSE_ROUTE=$f NINFER_CUDA_FUSE_ACT=$f NINFER_CUDA_FUSE_COMBINE=$f \
          timeout 200 "$BIN/ninfer" bench -m "$PENDING_MOE" --random-weights 1 --device cuda --kv-dtype bf16 \
          --prompt 512 --gen 64 --depth 128 --chunk 512 > "$OUT/moe_fuse$f.txt" 2>&1
        echo "MoE decode, fusions $f: exit $?"; grep -iE "decode|limit" "$OUT/moe_fuse$f.txt" | tail -3
      done
    fi ;;
  serve8b)
    # The GPU server under load (issue 28): random weights of SERVE8B_CONFIG's shape (default
    # .carry/configs/Llama-3.1-8B), for each of SERVE8B_FORMATS (default rk2v4-e8,bf16):
    # SERVE8B_REQUESTS (512) streamed requests from 256 concurrent clients, prompts of up to ~8K
    # tokens (--max-filler 400, no shared first page), 128 tokens each (--ignore-eos)
    # -> $OUT/serve8b_<format>.json (server_loadgen's JSON) and the server's stderr. The config
    # directory needs a tokenizer_config.json with a chat template (half the requests are chats).
    # SERVE8B_ARGS: more serve flags (default --step-tokens 2048 --prefill-chunk 2048).
    stamp serve8b
    cfg=${SERVE8B_CONFIG:-$ROOT/.carry/configs/Llama-3.1-8B}
    for f in $(echo "${SERVE8B_FORMATS:-rk2v4-e8,bf16}" | tr ',' ' '); do
      "$BIN/ninfer" serve -m "$cfg" --random-weights 1 --device cuda --kv-dtype "$f" --port 0 --max-context 16384 \
        --max-concurrency 256 --max-queue 1024 --no-request-log ${SERVE8B_ARGS:---step-tokens 2048 --prefill-chunk 2048} \
        2> "$OUT/serve8b_${f}_stderr.txt" &
      spid=$!
      port=""
      for i in $(seq 1 120); do
        port=$(grep -o "listening on http://[^ ]*" "$OUT/serve8b_${f}_stderr.txt" | sed 's/.*://'); [ -n "$port" ] && break; sleep 1
      done
      echo "serve8b $f port ${port:-none} after ${i}s"; grep "^capacity" "$OUT/serve8b_${f}_stderr.txt"
      if [ -n "$port" ]; then
        timeout "${SERVE8B_TIMEOUT:-240}" "$ROOT/build-gpu/bin/server_loadgen" --port "$port" --requests "${SERVE8B_REQUESTS:-512}" \
          --concurrency 256 --max-tokens 128 --ignore-eos --stream-only --max-filler 400 > "$OUT/serve8b_$f.json" 2>&1
        echo "loadgen $f exit $?"; cut -c1-900 "$OUT/serve8b_$f.json"
      fi
      kill $spid; wait $spid 2>/dev/null
    done
    stamp "serve8b done" ;;
  ncu)
    stamp ncu
    timeout 200 ncu --clock-control none -k regex:paged_attention --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy \
      "$BIN/ninfer" bench --attention --kv-dtype bf16 --ctx 32768 --batch 8 --heads 32/8 --head-dim 128 \
      > "$OUT/ncu.txt" 2>&1; echo "ncu exit $?"
    grep -E "Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Stall|Warp Cycles|Issued|Registers|L1/TEX Hit|Eligible" "$OUT/ncu.txt" | head -40 ;;
  ncuc)
    # The register decode kernel under Nsight Compute, full set, one launch per NCU_CASES entry
    # ("fmt/heads/head_dim/batch/ctx"): details page -> $OUT/ncuc_<fmt>_<...>.txt, per-SASS-
    # instruction counters and stall samples -> ..._src.csv.gz; and the SASS of attention.cu's
    # kernels (cuobjdump) -> $OUT/attention_sass.txt.gz
    stamp ncuc
    for c in ${NCU_CASES:-rk4v4-e8/32/8/128/8/131072 rk2v4-e8/32/8/128/8/131072}; do
      IFS=/ read -r f hq hkv d b n <<< "$c"
      tag="ncuc_${f}_${hq}x${hkv}x${d}_b${b}_${n}"
      timeout 150 ncu --clock-control none --set full --import-source no -k regex:decode_comp_kernel --launch-skip 3 \
        --launch-count 1 -f -o "/tmp/$tag" "$BIN/ninfer" bench --attention --kv-dtype "$f" --ctx "$n" --batch "$b" \
        --heads "$hq/$hkv" --head-dim "$d" > "$OUT/$tag.log" 2>&1
      echo "ncu $c exit $?"
      ncu -i "/tmp/$tag.ncu-rep" --page details > "$OUT/$tag.txt" 2>&1
      ncu -i "/tmp/$tag.ncu-rep" --page source --csv --print-source sass 2>&1 | gzip > "$OUT/${tag}_src.csv.gz"
      grep -E "Duration|Warp Cycles Per Issued|Issued Ipc|Executed Ipc|Achieved Occupancy|Registers Per|No Eligible|One or More" "$OUT/$tag.txt" | head -12
      # per 16-key slice of one warp: batch x kv heads x ctx / 16
      python3 bench/ncu_sass_summary.py "$OUT/${tag}_src.csv.gz" --per $((b * hkv * n / 16)) | tee "$OUT/${tag}_sass.txt" | head -24
    done
    obj=$(find build-gpu -name "attention.cu.o" | head -1)
    cuobjdump -sass "$obj" 2>&1 | gzip > "$OUT/attention_sass.txt.gz"; echo "sass $obj" ;;
  ncub1)
    # Per-kernel GPU durations of batch-1 decode steps (the decode kernel and the split merge,
    # each timed alone by Nsight Compute) for NCUB1_CASES "fmt/heads/head_dim/ctx": where the
    # batch-1 step time goes besides the kernels -> $OUT/ncub1.txt
    stamp ncub1
    for c in ${NCUB1_CASES:-rk4v4-e8/16/2/256/32768 rk2v4-e8/32/8/128/32768 bf16/32/8/128/32768}; do
      IFS=/ read -r f hq hkv d n <<< "$c"
      echo "--- $c" >> "$OUT/ncub1.txt"
      timeout 120 ncu --clock-control none -k "regex:decode_|merge_|paged_" --section SpeedOfLight --section LaunchStats --launch-skip 10 --launch-count 4 \
        "$BIN/ninfer" bench --attention --kv-dtype "$f" --ctx "$n" --batch 1 --heads "$hq/$hkv" --head-dim "$d" \
        >> "$OUT/ncub1.txt" 2>&1
      echo "ncub1 $c exit $?"
      grep -E "^  [a-z_]+.*\(|Duration|Grid Size|Registers Per" "$OUT/ncub1.txt" | tail -18
    done ;;
  pack)
    # Everything under $OUT into $OUT/all.tgz, the loose files removed: a device call returns at
    # most 8 files (docs/GPU.md, session 5). Put it last: later stages write loose files again.
    stamp pack
    tar czf /tmp/ninfer_all.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/ninfer_all.tgz "$OUT/all.tgz"
    echo "packed $OUT/all.tgz" ;;
  *) echo "unknown stage $stage"; exit 2 ;;
  esac
done
[ -f "$OUT/all.tgz" ] || stamp done
