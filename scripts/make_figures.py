#!/usr/bin/python3
"""Draws the figures of docs/BENCHMARKS.md and the README from the JSON in docs/data/.

  scripts/make_figures.py                        # docs/data/*.json -> docs/*.png (Debian's /usr/bin/python3)
  scripts/make_figures.py --capacity build/bin/ninfer
      # first re-plans docs/data/capacity.json with `ninfer kv-plan` (config.json only, no weights)

Needs matplotlib (Debian: `scripts/deps.sh --figures` installs python3-matplotlib). Inputs:
  docs/data/capacity.json                  kv-plan rows per model and memory size (made by --capacity)
  docs/data/quality_ref-qwen3-d256_gpu.jsonl  `ninfer perplexity --kl-ref bf16 --json` rows (H200)
  docs/data/decode_attention_h200_attn.jsonl  `ninfer bench --attention --json` (one document per line)
  docs/data/decode_attention_h200_sdpa.json   bench/sdpa_decode_attention.py's rows, same call
  docs/data/decode_batch_<gpu>.jsonl       `ninfer bench --batch 1,8,...,max --json`, a document per
                                           format (gpu_session.sh e2eb's e2eb.jsonl); optional
Outputs: docs/capacity.png, docs/kl_vs_bits.png, docs/decode_attention.png, docs/decode_batch.png.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "docs", "data")
DOCS = os.path.join(ROOT, "docs")

# Models and memory sizes of the capacity table (real configs in ../shared/real-configs), and the
# reference model whose layout gives the bits per value of the quality figure.
CAPACITY_MODELS = ["Llama-3.1-8B", "Qwen3-8B", "gemma-3-12b-it_textonly"]
CAPACITY_MEMORY = ["24GiB", "48GiB", "80GiB", "141GiB"]
BITS_MODEL = "ref-qwen3-d256"
FORMATS = ["bf16", "int8", "fp8", "k8v4", "nvfp4", "int4", "rk4v4-e8", "rk2v4-e8"]
COLORS = {"bf16": "#555555", "int8": "#1f77b4", "fp8": "#17becf", "k8v4": "#9467bd", "nvfp4": "#8c564b",
          "int4": "#ff7f0e", "rk4v4-e8": "#2ca02c", "rk2v4-e8": "#d62728", "e8-root-ref": "#bbbbbb"}


def kv_plan(ninfer, model_dir, memory):
    """One kv-plan run: its JSON rows plus the layout from the header line it prints on stderr."""
    p = subprocess.run([ninfer, "kv-plan", "-m", model_dir, "--memory", memory, "--json"],
                       capture_output=True, text=True)
    # kv-plan exits non-zero, after its rows (0 tokens each), when the weights alone do not fit.
    weights_fit = p.returncode == 0
    if not weights_fit and "do not fit" not in p.stderr:
        sys.exit(f"kv-plan -m {model_dir} --memory {memory} failed: {p.stderr.strip()}")
    m = re.search(r"layers (\d+), kv heads (\d+), head_dim (\d+)", p.stderr)
    if not m:
        sys.exit(f"kv-plan printed no layout line: {p.stderr.strip()}")
    layers, kv_heads, head_dim = map(int, m.groups())
    rows = json.loads(p.stdout)
    for r in rows:
        r.update(model=os.path.basename(model_dir.rstrip("/")), memory=memory, n_layers=layers,
                 n_kv_heads=kv_heads, head_dim=head_dim, weights_fit=weights_fit)
        if "kv_bytes_per_token" in r:  # K and V of every layer and kv head, bits per stored value
            r["bits_per_value"] = r["kv_bytes_per_token"] * 8 / (2 * layers * kv_heads * head_dim)
    return rows


def refresh_capacity(ninfer, shared):
    rows = []
    for m in CAPACITY_MODELS:
        for mem in CAPACITY_MEMORY:
            rows += kv_plan(ninfer, os.path.join(shared, "real-configs", m), mem)
    rows += kv_plan(ninfer, os.path.join(shared, "models", BITS_MODEL), "24GiB")
    with open(os.path.join(DATA, "capacity.json"), "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(r, separators=(",", ":")) for r in rows) + "\n]\n")  # a row a line
    print(f"wrote docs/data/capacity.json ({len(rows)} rows)")


def load_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def fig_capacity(plt, cap):
    mems = ["24GiB", "80GiB"]
    fmts = ["bf16", "int8", "int4", "rk4v4-e8", "rk2v4-e8"]
    fig, axes = plt.subplots(1, len(mems), figsize=(7.5, 3.0), sharey=False)
    for ax, mem in zip(axes, mems):
        width = 0.8 / len(fmts)
        for i, fmt in enumerate(fmts):
            ys = []
            for m in CAPACITY_MODELS:
                r = [x for x in cap if x["model"] == m and x["memory"] == mem and x["format"] == fmt]
                ys.append(r[0].get("tokens", 0) / 1000 if r else 0)
            xs = [j + (i - (len(fmts) - 1) / 2) * width for j in range(len(CAPACITY_MODELS))]
            ax.bar(xs, ys, width, label=fmt, color=COLORS[fmt])
        for j, m in enumerate(CAPACITY_MODELS):
            if any(x["model"] == m and x["memory"] == mem and not x["weights_fit"] for x in cap):
                ax.text(j, 0, "weights\ndo not fit", ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(CAPACITY_MODELS)))
        ax.set_xticklabels([m.replace("-it_textonly", "").replace("gemma", "Gemma") for m in CAPACITY_MODELS],
                           fontsize=8)
        ax.set_title(f"{mem.replace('GiB', ' GiB')} of device memory", fontsize=9)
        ax.set_ylabel("KV context (thousand tokens)", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=7, ncol=2)
    fig.suptitle("Tokens of KV context that fit, per format (ninfer kv-plan, bf16 weights)", fontsize=9)
    fig.tight_layout()
    return fig


# Points of int4, nvfp4 and rk4v4-e8 lie close together: their labels go on different sides.
LABEL_OFFSETS = {"int4": (-30, 4), "nvfp4": (6, 4), "rk4v4-e8": (6, -11), "rk2v4-e8": (6, -4)}


def fig_kl_vs_bits(plt, cap, quality):
    bits = {r["format"]: r["bits_per_value"] for r in cap if r["model"] == BITS_MODEL and "bits_per_value" in r}
    fig, ax = plt.subplots(figsize=(5.0, 3.2))
    for r in quality:
        if r.get("corpus") != "sotu_dev":
            continue
        f = r["kv_dtype"]
        ax.scatter(bits[f], r["kl"], color=COLORS.get(f, "k"), s=30, zorder=3)
        ax.annotate(f, (bits[f], r["kl"]), textcoords="offset points", xytext=LABEL_OFFSETS.get(f, (5, 3)),
                    fontsize=8)
    ax.set_yscale("log")
    ax.set_xlim(2.8, 9.0)
    ax.set_xlabel("bits per stored value (K and V, scales included)", fontsize=8)
    ax.set_ylabel("KL vs a bf16 cache (nats / token)", fontsize=8)
    ax.set_title("ref-qwen3-d256, sotu_dev, 64 x 1024 tokens, H200", fontsize=9)
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    return fig


def fig_decode_attention(plt, attn_docs, sdpa):
    shape = (32, 8, 128)
    rows = [r for d in attn_docs for r in d["rows"]
            if (r["n_heads"], r["n_kv_heads"], r["head_dim"]) == shape and not r["graph"] and not r["cold_l2"]]
    peer = {}
    for s in sdpa:
        if (s["n_heads"], s["n_kv_heads"], s["head_dim"]) == shape and not s["graph"] and not s["cold_l2"]:
            key = (s["batch"], s["ctx"])
            peer[key] = min(peer.get(key, float("inf")), s["median_ms"])
    cases = sorted(peer)
    fmts = [f for f in ["bf16", "int4", "rk4v4-e8", "rk2v4-e8"] if any(r["kv_dtype"] == f for r in rows)]
    fig, ax = plt.subplots(figsize=(6.0, 3.0))
    width = 0.8 / len(fmts)
    for i, f in enumerate(fmts):
        ys = []
        for c in cases:
            r = [x for x in rows if x["kv_dtype"] == f and (x["batch"], x["ctx"]) == c]
            ys.append(r[0]["median_ms"] / peer[c] if r else 0)
        ax.bar([j + (i - (len(fmts) - 1) / 2) * width for j in range(len(cases))], ys, width, label=f,
               color=COLORS[f])
    for y, f in [(0.6, "rk4v4-e8"), (0.4, "rk2v4-e8")]:
        ax.axhline(y, color=COLORS[f], linestyle="--", linewidth=0.8)
    ax.axhline(1.0, color="k", linewidth=0.8)
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels([f"batch {b}\n{c // 1024}K" for b, c in cases], fontsize=8)
    ax.set_ylabel("time / PyTorch SDPA (bf16)", fontsize=8)
    ax.set_title("Decode attention step, heads 32/8, head_dim 128, H200 (dashed: bars)", fontsize=9)
    ax.tick_params(labelsize=8)
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def fig_decode_batch(plt, runs, device):
    """Decode tokens/s against the batch per format at one depth; each format's line ends at
    the largest batch its KV fits (`max`)."""
    fig, ax = plt.subplots(figsize=(6.0, 3.2))
    for run in runs:
        f = run["kv_dtype"]
        pts = sorted((r["batch"], r["decode_tokens_per_s"]) for r in run["decode_batches"] if r["fits"])
        if not pts:
            continue
        ax.plot([b for b, _ in pts], [t for _, t in pts], marker="o", markersize=3, label=f, color=COLORS.get(f))
        b, t = pts[-1]
        ax.annotate(f"{b}", (b, t), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequences decoded together (last point: the most the KV pool holds)", fontsize=8)
    ax.set_ylabel("decode tokens/s", fontsize=8)
    depth = runs[0]["depth"]
    ax.set_title(f"Batched decode at {depth // 1024}K context, Llama-3.1-8B shape, {device}", fontsize=9)
    ax.tick_params(labelsize=8)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    return fig


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--capacity", metavar="NINFER", help="re-plan docs/data/capacity.json with this ninfer binary")
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"), help="the shared directory (real-configs/, models/)")
    ap.add_argument("--out", default=DOCS, help="where the PNGs go")
    a = ap.parse_args()
    if a.capacity:
        refresh_capacity(a.capacity, a.shared)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit(f"make_figures.py needs matplotlib, which {sys.executable} lacks: scripts/deps.sh --figures installs "
                 "Debian's python3-matplotlib for /usr/bin/python3")
    with open(os.path.join(DATA, "capacity.json")) as f:
        cap = json.load(f)
    quality = load_jsonl(os.path.join(DATA, "quality_ref-qwen3-d256_gpu.jsonl"))
    attn = load_jsonl(os.path.join(DATA, "decode_attention_h200_attn.jsonl"))
    with open(os.path.join(DATA, "decode_attention_h200_sdpa.json")) as f:
        sdpa = json.load(f)
    figs = [("capacity.png", fig_capacity(plt, cap)),
            ("kl_vs_bits.png", fig_kl_vs_bits(plt, cap, quality)),
            ("decode_attention.png", fig_decode_attention(plt, attn, sdpa))]
    # decode_batch_<device>.jsonl: the newest run, named by the GPU it ran on
    for batch_path in sorted(glob.glob(os.path.join(DATA, "decode_batch_*.jsonl")))[-1:]:
        device = os.path.basename(batch_path)[len("decode_batch_"):-len(".jsonl")].upper()
        figs.append(("decode_batch.png", fig_decode_batch(plt, load_jsonl(batch_path), device)))
    for name, fig in figs:
        path = os.path.join(a.out, name)
        # NOTE: metadata without the matplotlib version or a date, so a re-run on the same data
        # gives the same bytes.
        fig.savefig(path, dpi=100, metadata={"Software": None})
        plt.close(fig)
        print(f"wrote {os.path.relpath(path, ROOT)} ({os.path.getsize(path) // 1024} KiB)")


if __name__ == "__main__":
    main()
