#!/usr/bin/env python3
"""Tables of batched decode (`ninfer bench ... --batch 1,8,...,max --json`, one JSON document per
format, e.g. gpu_session.sh e2eb's e2eb.jsonl): tokens/s and step time against the bandwidth
limit per format and batch, then each format's largest batch (equal memory) against bf16's.
   python3 bench/batch_table.py RUNS.jsonl"""
import json
import sys


def main(path):
    runs = [json.loads(line) for line in open(path) if line.startswith("{")]
    if not runs:
        sys.exit(f"{path}: no bench documents")
    # the explicit entries as columns (`max` differs per format: it goes to the second table)
    batches = sorted({r["batch"] for run in runs for r in run["decode_batches"] if not r.get("batch_max")})
    depth = runs[0]["depth"]
    print(f"\nDecode at depth {depth}: tokens/s (step time / bandwidth limit)\n")
    print("| kv | " + " | ".join(f"batch {b}" for b in batches) + " |")
    print("|---|" + "---:|" * len(batches))
    for run in runs:
        by = {r["batch"]: r for r in run["decode_batches"] if r["fits"]}
        cells = []
        for b in batches:
            r = by.get(b)
            if r is None:
                asked = any(x["batch"] == b and not x.get("batch_max") for x in run["decode_batches"])
                cells.append("does not fit" if asked else "")
            else:
                lim = f" ({r['decode_vs_limit']:.2f}x)" if "decode_vs_limit" in r else ""
                cells.append(f"{r['decode_tokens_per_s']:,.0f}{lim}")
        print(f"| {run['kv_dtype']} | " + " | ".join(cells) + " |")
    print("\nEqual memory: each format's largest batch at this depth\n")
    print("| kv | largest batch | tokens/s | vs bf16's largest |")
    print("|---|---:|---:|---:|")
    best = {}
    for run in runs:
        fit = [r for r in run["decode_batches"] if r["fits"]]
        if fit:
            best[run["kv_dtype"]] = max(fit, key=lambda r: r["batch"])
    ref = best.get("bf16")
    for kv, r in best.items():
        ratio = f"{r['decode_tokens_per_s'] / ref['decode_tokens_per_s']:.2f}x" if ref else "-"
        print(f"| {kv} | {r['batch']} | {r['decode_tokens_per_s']:,.0f} | {ratio} |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
