#!/usr/bin/env python3
"""Summary of an Nsight Compute per-SASS-instruction export (the `ncuc` stage of
bench/gpu_session.sh writes one: `ncu -i REP --page source --csv --print-source sass | gzip`).

    python3 bench/ncu_sass_summary.py FILE.csv[.gz] [--per N]

Prints the executed warp instructions by opcode (with their share of the stall samples), the
stall reasons over all samples, and the largest groups of instructions executed equally often
(a loop body's). --per N divides the counts by N (e.g. the number of 16-key slices the launch
walked: batch x kv heads x ctx / 16) to give instructions per unit of work.
"""
import argparse
import collections
import csv
import gzip
import re
import signal


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` in gpu_session.sh: stop quietly
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--per", type=float, default=0.0)
    a = ap.parse_args()
    opener = gzip.open if a.file.endswith(".gz") else open
    with opener(a.file, "rt") as f:
        rows = list(csv.reader(f))
    hdr = next(r for r in rows if "Source" in r and "Instructions Executed" in r)
    data = rows[rows.index(hdr) + 1:]
    ix = {h: i for i, h in enumerate(hdr)}
    stall_cols = [h for h in hdr if h.startswith("stall_") and "(Not Issued)" not in h]
    ops, op_samples, stalls = collections.Counter(), collections.Counter(), collections.Counter()
    total = samples = 0
    counts = []
    for r in data:
        if len(r) < len(hdr):
            continue
        src = r[ix["Source"]].strip()
        n = int(r[ix["Instructions Executed"]] or 0)
        m = re.match(r"(@!?U?P\w+\s+)?([A-Z0-9_]+)", src)
        op = m.group(2) if m else src
        s = int(r[ix["Warp Stall Sampling (All Samples)"]] or 0)
        ops[op] += n
        op_samples[op] += s
        total += n
        samples += s
        counts.append(n)
        for c in stall_cols:
            stalls[c] += int(r[ix[c]] or 0)
    per = a.per if a.per > 0 else 1.0
    unit = f" per {a.per:g}" if a.per > 0 else ""
    print(f"executed warp instructions: {total / per:,.1f}{unit}; stall samples: {samples:,}")
    print(f"{'opcode':<12} {'count' + unit:>16} {'share':>7} {'stalls':>7}")
    for op, n in ops.most_common(30):
        print(f"{op:<12} {n / per:16,.1f} {100 * n / max(total, 1):6.1f}% {100 * op_samples[op] / max(samples, 1):6.1f}%")
    print("\nstall reasons (all samples)")
    for c, n in stalls.most_common(12):
        print(f"  {c:<28} {100 * n / max(samples, 1):5.1f}%")
    # Loop bodies show as many instructions executed the same number of times.
    by_count = collections.Counter(n for n in counts if n > 0)
    print("\ninstructions by execution count (the largest groups: loop bodies)")
    for n, k in sorted(by_count.items(), key=lambda x: -x[0] * x[1])[:4]:
        print(f"  {k:6d} instructions executed {n / per:,.2f} times{unit} each")


if __name__ == "__main__":
    main()
