#!/usr/bin/env python3
"""The decode-attention tables of docs/BENCHMARKS.md from raw bench files.

    python3 bench/attention_tables.py --peer ATTN.jsonl SDPA.json [--copy-gbps 4165] \\
        [--graph ATTN.jsonl SDPA.json] [--cold ATTN.jsonl SDPA.json]

ATTN.jsonl: `ninfer bench --attention --json` lines (bench/gpu_session.sh attn writes them to
$OUT/attn.jsonl); SDPA.json: bench/sdpa_decode_attention.py --json (the sdpa stage's
$OUT/sdpa.json), the fastest SDPA backend of each shape being the peer. Prints, as Markdown:
the peer-method table (SDPA, bf16, int4, rk4v4-e8, rk2v4-e8 with their ratios to SDPA, and
rk4v4-e8 / rk2v4-e8 GB/s beside the copy bandwidth), then one table with the graph and cold-L2
columns side by side when given, and per timing method how many rows meet issue 6's bars
(rk4v4-e8 <= 0.6x, rk2v4-e8 <= 0.4x). A ratio over its bar is bold; one within 0.005 of its
bar gets three decimals. Rows are the shapes x batches x contexts present in every file.
"""
import argparse
import json
import sys

BARS = {"rk4v4-e8": 0.6, "rk2v4-e8": 0.4}


def load_ours(path):
    rows = {}
    with open(path) as f:
        for line in f:
            if not line.startswith("{"):
                continue
            for r in json.loads(line)["rows"]:
                key = (r["n_heads"], r["n_kv_heads"], r["head_dim"], r["batch"], r["ctx"])
                rows[key + (r["kv_dtype"],)] = (r["median_ms"], r["gbps"])
    return rows


def load_sdpa(path):
    best = {}
    with open(path) as f:
        for r in json.load(f):
            key = (r["n_heads"], r["n_kv_heads"], r["head_dim"], r["batch"], r["ctx"])
            if key not in best or r["median_ms"] < best[key][0]:
                best[key] = (r["median_ms"], r["backend"])
    return best


def ratio_cell(ms, sdpa_ms, bar=None):
    x = ms / sdpa_ms
    near = bar is not None and abs(x - bar) < 0.005
    text = ("%.3fx" if near else "%.2fx") % x
    if bar is not None and x > bar:
        text = "**%s**" % text
    return "%.4f (%s)" % (ms, text)


def shape_order(keys):
    # head_dim 128 first, then by heads; batch, then context ascending
    return sorted(keys, key=lambda k: (k[2] != 128, -k[0] if k[2] == 128 else k[0], k[3], k[4]))


def common_keys(pairs, formats):
    keys = None
    for ours, sdpa in pairs:
        ks = {k for k in sdpa if all(k + (f,) in ours for f in formats)}
        keys = ks if keys is None else keys & ks
    return shape_order(keys or [])


def count_bars(ours, sdpa, keys):
    out = []
    for f, bar in BARS.items():
        ratios = [ours[k + (f,)][0] / sdpa[k][0] for k in keys]
        met = sum(x <= bar for x in ratios)
        out.append("%s %.2f-%.2fx, %d of %d within %.1fx" % (f, min(ratios), max(ratios), met, len(ratios), bar))
    return "; ".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peer", nargs=2, metavar=("ATTN", "SDPA"), required=True)
    ap.add_argument("--graph", nargs=2, metavar=("ATTN", "SDPA"))
    ap.add_argument("--cold", nargs=2, metavar=("ATTN", "SDPA"))
    ap.add_argument("--copy-gbps", type=float, default=0.0, help="copy bandwidth for the % column (peer call)")
    a = ap.parse_args()
    formats = ["bf16", "int4", "rk4v4-e8", "rk2v4-e8"]
    peer = (load_ours(a.peer[0]), load_sdpa(a.peer[1]))
    extra = [(name, (load_ours(p[0]), load_sdpa(p[1]))) for name, p in (("graph", a.graph), ("cold L2", a.cold)) if p]
    keys = common_keys([peer] + [p for _, p in extra], formats)
    if not keys:
        sys.exit("attention_tables.py: no shape is in every file with all of " + ", ".join(formats))

    ours, sdpa = peer
    pct = a.copy_gbps > 0
    print("| heads/kv/D | B | ctx | SDPA ms | bf16 ms (x) | int4 ms (x) | rk4v4-e8 ms (x, bar 0.6x) "
          "| rk2v4-e8 ms (x, bar 0.4x) | rk4 / rk2 GB/s |" + (" rk4 / rk2 % copy |" if pct else ""))
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if pct else ""))
    for k in keys:
        s_ms, backend = sdpa[k]
        cells = [ratio_cell(ours[k + (f,)][0], s_ms, BARS.get(f)) for f in formats]
        g4, g2 = ours[k + ("rk4v4-e8",)][1], ours[k + ("rk2v4-e8",)][1]
        row = "| %d/%d/%d | %d | %d | %.4f (%s) | %s | %.0f / %.0f |" % (k + (s_ms, backend, " | ".join(cells), g4, g2))
        if pct:
            row += " %.0f / %.0f |" % (100 * g4 / a.copy_gbps, 100 * g2 / a.copy_gbps)
        print(row)
    print()
    print("- peer method: " + count_bars(ours, sdpa, keys))

    if extra:
        print()
        head = "| heads/kv/D | B | ctx |"
        rule = "|---|---:|---:|"
        for name, _ in extra:
            head += " %s: SDPA ms | int4 (x) | rk4v4-e8 (x) | rk2v4-e8 (x) |" % name
            rule += "---:|---:|---:|---:|"
        print(head)
        print(rule)
        for k in keys:
            row = "| %d/%d/%d | %d | %d |" % k
            for _, (o, s) in extra:
                s_ms, backend = s[k]
                cells = [ratio_cell(o[k + (f,)][0], s_ms, BARS.get(f)) for f in ("int4", "rk4v4-e8", "rk2v4-e8")]
                row += " %.4f (%s) | %s |" % (s_ms, backend, " | ".join(cells))
            print(row)
        print()
        for name, (o, s) in extra:
            print("- %s: %s" % (name, count_bars(o, s, keys)))


if __name__ == "__main__":
    main()
