#!/usr/bin/env python3
"""Turns `bench/quality.sh` JSON outputs into the markdown quality table of docs/BENCHMARKS.md,
marking PRODUCT.md's per-format bars met or missed.
   python3 bench/quality_table.py RUN.json [RUN.json ...]"""
import json
import sys

# PRODUCT.md quality bars: (max ppl increase %, max KL, must beat int4)
BARS = {
    "int8": (0.3, 0.002, False),
    "fp8": (0.3, 0.002, False),
    "rk4v4-e8": (1.0, 0.03, True),
    "rk2v4-e8": (4.0, 0.2, False),
}


def rows(run):
    return run if isinstance(run, list) else [run]


def main(paths):
    for path in paths:
        data = rows(json.load(open(path)))
        first = data[0]
        by = {r["kv_dtype"]: r for r in data}
        int4 = by.get("int4")
        print(f"\n{first['model']} on {first['file'].split('/')[-1]}, {first['windows']} windows of "
              f"{first['ctx']} ({first['tokens']} scored tokens); bf16 PPL {first['ref_ppl']:.4f}\n")
        print("| format | PPL | vs bf16 | KL vs bf16 | top-1 agree | bar (PRODUCT.md) |")
        print("|---|---:|---:|---:|---:|---|")
        for r in data:
            d = 100.0 * (r["ppl"] / r["ref_ppl"] - 1.0)
            bar = BARS.get(r["kv_dtype"])
            verdict = ""
            if bar:
                ok = d <= bar[0] and r["kl"] <= bar[1]
                if bar[2] and int4:
                    ok = ok and r["ppl"] < int4["ppl"] and r["kl"] < int4["kl"]
                cond = f"≤ +{bar[0]} %, KL ≤ {bar[1]}" + (", below int4" if bar[2] else "")
                verdict = f"{cond}: **{'met' if ok else 'MISSED'}**"
            print(f"| `{r['kv_dtype']}` | {r['ppl']:.4f} | {d:+.2f} % | {r['kl']:.5f} | "
                  f"{r['top1_agree']:.4f} | {verdict} |")


if __name__ == "__main__":
    main(sys.argv[1:])
