"""Joins `ninfer bench --attention --json` rows of any KV formats with
sdpa_decode_attention.py --json rows and prints, per shape, each format's decode-attention
step time, its ratio to the best PyTorch SDPA backend on a bf16 cache of the same shape (the
issue's targets: rk4v4-e8 <= 0.6x, rk2v4-e8 <= 0.4x) and its KV bytes read / time beside the
device-to-device copy bandwidth (measured here with torch when it is available: one 2 GiB
clone, bytes read + written, median of 10).

usage: python3 bench/compare_compressed_attention.py SDPA.json OURS.jsonl [OURS2.jsonl ...]
"""
import json, sys


def copy_bandwidth_gbps():
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    n = 1 << 30  # bf16 elements: 2 GiB
    a = torch.empty(n, dtype=torch.bfloat16, device="cuda").uniform_()
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    times = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        b.copy_(a)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return 2 * 2 * n / (times[len(times) // 2] * 1e-3) / 1e9


sdpa = json.load(open(sys.argv[1]))
ours = []
for path in sys.argv[2:]:
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            ours += json.loads(line).get("rows", [])
best = {}
for r in sdpa:
    key = (r["n_heads"], r["n_kv_heads"], r["head_dim"], r["batch"], r["ctx"])
    if key not in best or r["median_ms"] < best[key]["median_ms"]:
        best[key] = r
fmts = []
mine = {}
for r in ours:
    if r["kv_dtype"] not in fmts:
        fmts.append(r["kv_dtype"])
    mine[(r["n_heads"], r["n_kv_heads"], r["head_dim"], r["batch"], r["ctx"], r["kv_dtype"])] = r
bw = copy_bandwidth_gbps()
print(f"copy bandwidth (torch, read + write): {bw:.0f} GB/s" if bw else "copy bandwidth: not measured")
print(f"{'shape':>10} {'B':>2} {'ctx':>7} | {'SDPA ms':>8} {'backend':>8} | {'format':>9} {'ms':>8} "
      f"{'x SDPA':>7} {'GB/s':>6} {'% copy':>6}")
for key in sorted(best):
    s = best[key]
    shape = f"{key[0]}/{key[1]}/{key[2]}"
    for f in fmts:
        r = mine.get(key + (f,))
        if not r:
            continue
        pct = f"{100 * r['gbps'] / bw:.0f}" if bw else "-"
        print(f"{shape:>10} {key[3]:>2} {key[4]:>7} | {s['median_ms']:8.4f} {s['backend']:>8} | {f:>9} "
              f"{r['median_ms']:8.4f} {r['median_ms'] / s['median_ms']:6.2f}x {r['gbps']:6.0f} {pct:>6}")
