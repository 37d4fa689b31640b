"""Joins `ninfer bench --attention --json` output (one or more files, one JSON document per
line) with sdpa_decode_attention.py --json rows and prints, per shape, our bf16 and int8 step
times beside the best SDPA backend's, with the ratios the issue asks for.

usage: python3 bench/compare_attention.py SDPA.json OURS.jsonl [OURS2.jsonl ...]
"""
import json, sys

sdpa = json.load(open(sys.argv[1]))
ours = []
for path in sys.argv[2:]:
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            doc = json.loads(line)
            ours += doc.get("rows", [])
best = {}
for r in sdpa:
    key = (r["n_heads"], r["n_kv_heads"], r["head_dim"], r["batch"], r["ctx"])
    if key not in best or r["median_ms"] < best[key]["median_ms"]:
        best[key] = r
mine = {}
for r in ours:
    mine[(r["n_heads"], r["n_kv_heads"], r["head_dim"], r["batch"], r["ctx"], r["kv_dtype"])] = r
print(f"{'shape':>14} {'B':>2} {'ctx':>7} | {'SDPA ms':>8} {'(backend)':>9} | {'bf16 ms':>8} {'bf16/SDPA':>9} | "
      f"{'int8 ms':>8} {'int8/bf16':>9} | {'bf16 GB/s':>9} {'int8 GB/s':>9}")
for key in sorted(best):
    s = best[key]
    b = mine.get(key + ("bf16",))
    i = mine.get(key + ("int8",))
    shape = f"{key[0]}/{key[1]}/{key[2]}"
    bm = f"{b['median_ms']:.4f}" if b else "-"
    br = f"{b['median_ms'] / s['median_ms']:.2f}x" if b else "-"
    im = f"{i['median_ms']:.4f}" if i else "-"
    ir = f"{i['median_ms'] / b['median_ms']:.2f}x" if (i and b) else "-"
    bg = f"{b['gbps']:.0f}" if b else "-"
    ig = f"{i['gbps']:.0f}" if i else "-"
    print(f"{shape:>14} {key[3]:>2} {key[4]:>7} | {s['median_ms']:8.4f} {s['backend']:>9} | {bm:>8} {br:>9} | "
          f"{im:>8} {ir:>9} | {bg:>9} {ig:>9}")
