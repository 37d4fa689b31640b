#!/usr/bin/env python3
"""Collect the raw output of bench/llama_cpp/compare.sh into one JSON file and a markdown table.

Each cell is the median over the repetitions: llama-bench's samples_ts of one test, or the
tokens/s of each separate `ninfer bench` round.
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess


def median_of(samples):
    return statistics.median(samples) if samples else None


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def tail(path, n=3):
    lines = [l for l in read(path).splitlines() if l.strip()]
    return " | ".join(lines[-n:])


def failure(base):
    """Why a run left no result: its exit status and the end of its stderr."""
    rc = read(base + ".rc").strip()
    how = f"exit {rc}" if rc else "no exit status"
    if rc.isdigit() and int(rc) > 128:
        how += f" (signal {int(rc) - 128}{', segmentation fault' if int(rc) == 139 else ''})"
    return f"{how}: {tail(base + '.err', 2) or 'no output'}"


def ninfer_doc(base):
    for line in read(base + ".out").splitlines():
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


def llama_tests(base):
    text = read(base + ".out")
    try:
        return json.loads(text) if text.strip() else None
    except json.JSONDecodeError:
        return None


def collect(row, a, fetch):
    """fetch(round, depth) -> list of (point, tokens/s, extra dict) or an error string."""
    samples = {"prompt": [], "decode_short": [], "decode_long": []}
    for r in range(1, a.reps + 1):
        for depth in (0, a.depth):
            got = fetch(r, depth)
            if isinstance(got, str):
                row["errors"].append(f"round {r} depth {depth}: {got}")
                continue
            for point, tps, extra in got:
                samples[point].append(tps)
                row["rounds"].append({"round": r, "point": point, "tok_s": tps, **extra})
    for point, v in samples.items():
        if v:
            row[point] = {"median_tok_s": median_of(v), "samples_tok_s": v}


def llama_row(raw, kv, fa, a):
    tag = f"llama_{kv}_fa{fa}"
    row = {"engine": "llama.cpp", "kv": kv, "flash_attn": int(fa),
           "label": f"llama.cpp {kv}" + (" (FA on)" if fa == "1" else " (FA off)"),
           "prompt": None, "decode_short": None, "decode_long": None, "errors": [], "rounds": []}

    def fetch(r, depth):
        base = os.path.join(raw, f"{tag}_d{depth}_r{r}")
        tests = llama_tests(base)
        if not tests:
            return failure(base)
        out = []
        for t in tests:
            n_p, n_g, n_d = t.get("n_prompt", 0), t.get("n_gen", 0), t.get("n_depth", 0)
            point = ("prompt" if n_p and not n_g and not n_d else "decode_short" if n_g and not n_d
                     else "decode_long" if n_g and n_d == a.depth else None)
            if point is None:
                continue
            ts = t.get("samples_ts") or [t.get("avg_ts")]
            out.append((point, median_of(ts), {"n_prompt": n_p, "n_gen": n_g, "n_depth": n_d,
                                               "samples_ns": t.get("samples_ns")}))
            for k in ("build_commit", "build_number", "cpu_info", "model_type", "model_size", "model_n_params",
                      "n_threads", "n_batch", "n_ubatch", "type_k", "type_v", "backends"):
                row.setdefault("llama_bench", {})[k] = t.get(k)
        return out

    collect(row, a, fetch)
    return row


def ninfer_row(raw, kv, a):
    row = {"engine": "ninfer", "kv": kv, "label": f"ninfer {kv}",
           "prompt": None, "decode_short": None, "decode_long": None, "errors": [], "rounds": []}

    def fetch(r, depth):
        base = os.path.join(raw, f"ninfer_{kv}_d{depth}_r{r}")
        doc = ninfer_doc(base)
        if doc is None:
            return failure(base)
        extra = {k: doc.get(k) for k in ("backend", "decode_step_ms", "decode_context", "prefill_seconds",
                                         "kv_capacity_tokens", "capacity", "host_peak_rss_gib")}
        out = []
        if depth == 0 and doc.get("prefill_tokens_per_s"):
            out.append(("prompt", doc["prefill_tokens_per_s"], extra))
        if doc.get("decode_tokens_per_s"):
            out.append(("decode_short" if depth == 0 else "decode_long", doc["decode_tokens_per_s"], extra))
        return out

    collect(row, a, fetch)
    return row


def git(repo, *args):
    try:
        return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def cpu_model():
    for line in read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main():
    ap = argparse.ArgumentParser()
    for k in ("raw", "out", "model", "gguf", "llama-bench", "ninfer", "repo", "llama-kv", "ninfer-kv"):
        ap.add_argument("--" + k, required=True)
    for k in ("threads", "prompt", "gen", "depth"):
        ap.add_argument("--" + k, type=int, required=True)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    a.reps = max([int(f.rsplit("_r", 1)[1].split(".")[0]) for f in os.listdir(a.raw)
                  if f.startswith(("ninfer_", "llama_")) and f.endswith(".out")] or [0])

    rows = []
    if a.only != "ninfer":
        for kvfa in a.llama_kv.split():
            kv, fa = kvfa.split(":")
            rows.append(llama_row(a.raw, kv, fa, a))
    if a.only != "llama":
        for kv in a.ninfer_kv.split():
            rows.append(ninfer_row(a.raw, kv, a))

    commit_file = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(a.llama_bench))), "COMMIT")
    if not os.path.exists(commit_file):
        commit_file = os.path.join(os.path.dirname(os.path.dirname(a.llama_bench)), "COMMIT")
    meta = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "host_cpu": cpu_model(), "nproc": os.cpu_count(), "threads": a.threads,
        "model": a.model, "gguf": a.gguf,
        "points": {"prompt_tokens": a.prompt, "decode_tokens": a.gen, "long_depth": a.depth,
                   "decode_short_context": f"1..{a.gen}",
                   "decode_long_context": f"{a.depth + 1}..{a.depth + a.gen}"},
        "llama_bench": a.llama_bench,
        "llama_cpp_commit": read(commit_file).strip() or None,
        "ninfer": a.ninfer,
        "ninfer_binary_used": read(os.path.join(a.raw, "ninfer_binary.txt")).splitlines(),
        "repo_commit": git(a.repo, "rev-parse", "HEAD"),
        "load": read(os.path.join(a.raw, "load.txt")).splitlines(),
        "commands": read(os.path.join(a.raw, "commands.txt")).splitlines(),
        "raw_dir": a.raw,
    }
    with open(a.out, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)

    bin_mtime = next((l.split(": ", 1)[1][:19] for l in meta["ninfer_binary_used"] if l.startswith("mtime")), "")

    def cell(c):
        return f"{c['median_tok_s']:.1f}" if c and c.get("median_tok_s") else "—"

    print(f"\n{os.path.basename(a.model)}, {a.threads} threads, {meta['host_cpu']}; "
          f"llama.cpp {(meta['llama_cpp_commit'] or '?')[:12]}, ninfer {(meta['repo_commit'] or '?')[:12]}"
          f"{' (binary ' + bin_mtime + ')' if bin_mtime else ''}; "
          f"medians of {a.reps or 'the'} repetitions, tokens/s\n")
    print(f"| engine + KV | prompt {a.prompt} tok/s | decode tok/s, ctx ~{a.gen} (1..{a.gen}) "
          f"| decode tok/s, ctx ~{a.depth + a.gen // 2} ({a.depth + 1}..{a.depth + a.gen}) |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['label']} | {cell(r['prompt'])} | {cell(r['decode_short'])} | {cell(r['decode_long'])} |")
    errs = [(r["label"], e) for r in rows for e in r["errors"]]
    for label, e in errs:
        print(f"\n{label}: {e}")
    print(f"\nraw numbers: {a.out} (tool output: {a.raw})")


if __name__ == "__main__":
    main()
