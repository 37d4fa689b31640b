"""Prefill attention, ninfer against PyTorch SDPA (flash and cuDNN backends), TFLOP/s counting
the causal FLOPs 2 * 2 * n_heads * head_dim * N^2 / 2 for a prompt of N tokens as one chunk.
Inputs: the SDPA JSON of bench/sdpa_prefill_attention.py and the JSON lines of
`ninfer bench --attention --ctx N --queries N --json` (bench/gpu_session.sh pattn), or
bench/prefill_variants.sh's rows tagged with a variant (the median over its passes is shown).

usage: python3 bench/compare_prefill_attention.py sdpa_prefill.json pattn.jsonl
"""
import json, sys


def tflops(nh, d, n, ms):
    return 2 * 2 * nh * d * n * n / 2 / (ms * 1e-3) / 1e12


def main():
    sdpa = json.load(open(sys.argv[1]))["rows"]
    peer = {}
    for r in sdpa:
        peer[(r["backend"], r["n_heads"], r["n_kv_heads"], r["head_dim"], r["ctx"])] = r["median_ms"]
    rows = []
    for line in open(sys.argv[2]):
        line = line.strip()
        if line.startswith("{"):
            rows.extend(x for x in json.loads(line)["rows"] if x["n_query"] == x["ctx"])
    # Rows of one variant, shape, prompt and format over several passes: their median.
    groups = {}
    for r in rows:
        key = (r.get("variant", ""), r["n_heads"], r["n_kv_heads"], r["head_dim"], r["ctx"], r["kv_dtype"])
        groups.setdefault(key, []).append(r)
    ours = []
    for key, rs in groups.items():
        ms = sorted(x["median_ms"] for x in rs)
        r = dict(rs[0], median_ms=ms[len(ms) // 2])
        ours.append(r)
    ours.sort(key=lambda r: (r["n_heads"], r["head_dim"], r["ctx"], r["kv_dtype"], r.get("variant", "")))
    print("| heads | prompt | kv | variant | ninfer ms | ninfer TFLOP/s | SDPA flash TFLOP/s | SDPA cuDNN TFLOP/s | vs cuDNN |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in ours:
        nh, nkv, d, n = r["n_heads"], r["n_kv_heads"], r["head_dim"], r["ctx"]
        t = tflops(nh, d, n, r["median_ms"])
        fl = peer.get(("flash", nh, nkv, d, n))
        cu = peer.get(("cudnn", nh, nkv, d, n))
        fl_s = f"{tflops(nh, d, n, fl):.0f}" if fl else "-"
        cu_s = f"{tflops(nh, d, n, cu):.0f}" if cu else "-"
        ratio = f"{cu / r['median_ms']:.2f}x" if cu else "-"
        print(f"| {nh}/{nkv}/{d} | {n} | {r['kv_dtype']} | {r.get('variant', '')} | {r['median_ms']:.3f} | {t:.0f} | {fl_s} | {cu_s} | {ratio} |")


if __name__ == "__main__":
    main()
