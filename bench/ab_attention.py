"""A/B of two `ninfer` builds' decode-attention step times: `ninfer bench --attention --json`
output (gpu_session.sh's attn.jsonl) of build A and of build B, each from one or more passes.
Per (format, shape, batch, ctx) it takes each build's smallest median over its passes and
prints B / A, and, when a build has two or more passes, the spread of its medians (max / min:
a B / A closer to 1 than that is noise).

usage: python3 bench/ab_attention.py A1.jsonl[,A2.jsonl...] B1.jsonl[,B2.jsonl...]
"""
import json
import sys


def load(paths):
    best, spread = {}, {}
    for path in paths.split(","):
        for line in open(path):
            if not line.startswith("{"):
                continue
            for r in json.loads(line).get("rows", []):
                key = (r["kv_dtype"], f'{r["n_heads"]}/{r["n_kv_heads"]}/{r["head_dim"]}', r["batch"], r["ctx"])
                t = r["median_ms"] * 1e3
                best[key] = min(best.get(key, t), t)
                lo, hi = spread.get(key, (t, t))
                spread[key] = (min(lo, t), max(hi, t))
    return best, spread


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a, sa = load(sys.argv[1])
    b, sb = load(sys.argv[2])
    print(f"{'format':>9} {'shape':>10} {'B':>2} {'ctx':>7} | {'A us':>8} {'B us':>8} {'B/A':>6} | "
          f"{'A spread':>8} {'B spread':>8}")
    ratios = []
    for key in sorted(set(a) & set(b)):
        r = b[key] / a[key]
        ratios.append(r)
        print(f"{key[0]:>9} {key[1]:>10} {key[2]:>2} {key[3]:>7} | {a[key]:8.2f} {b[key]:8.2f} {r:6.3f} | "
              f"{sa[key][1] / sa[key][0]:8.3f} {sb[key][1] / sb[key][0]:8.3f}")
    if ratios:
        print(f"B/A: min {min(ratios):.3f}, max {max(ratios):.3f} over {len(ratios)} rows")


if __name__ == "__main__":
    main()
