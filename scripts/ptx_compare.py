#!/usr/bin/env python3
"""Compares the PTX of every kernel of CUDA sources between a git revision and the working tree.

    scripts/ptx_compare.py BASE_REV [src/backend/cuda/attention.cu ...]

A tool for refactoring kernels on a machine without a GPU: a change whose kernels compile to the
same PTX (up to a consistent renaming of virtual registers, and branch labels) cannot change
what runs. It compiles each file
to PTX for compute_90 twice, once from BASE_REV (a temporary git worktree) and once from the
working tree, and prints per kernel "same" or the first lines of the difference.

NOTE: cicc itself is not deterministic at this level: two compiles of the same source can differ
in a few kernels by a reordered or vectorised shared-memory load (seen in the Hadamard butterfly
of smem_rotate). --twice compiles the working tree a second time so that such noise shows up as
such. A kernel reported as differing may still be equivalent: read the diff (session 4's online-
softmax helper made two loop-carried registers, both starting at -inf, swap roles). ptxas output
(SASS) is less reproducible still, so cubins are not compared.
"""
import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile

FLAGS = ["-O3", "-DNDEBUG", "-arch=compute_90", "--expt-relaxed-constexpr", "-std=c++17", "-x", "cu", "-ptx"]
KERNEL = re.compile(r"\n(?=(?:\.visible\s+)?\.(?:entry|func)\s)")
NAME = re.compile(r"(?:\.visible\s+)?\.(?:entry|func)\s+(?:\([^)]*\)\s*)?(\S+?)\(")
REG = re.compile(r"%(f|r|rd|p|fd|rs|h|hh)(\d+)")
ANON = re.compile(r"_GLOBAL__N__[0-9a-f]+_\d+_\w+?_[0-9a-f]{8}(?=\d)")
INTERNAL = re.compile(r"_INTERNAL_[0-9a-f]{8}_")  # internal-linkage names hash the path too


def normalise(body):
    """Virtual registers renamed in order of first use (for printing differences)."""
    names, counts = {}, {}

    def rename(m):
        key = m.group(0)
        if key not in names:
            n = counts.get(m.group(1), 0)
            counts[m.group(1)] = n + 1
            names[key] = "%%%s%d" % (m.group(1), n)
        return names[key]

    return REG.sub(rename, body)


def kernels(ptx):
    """name -> body with labels normalised (registers as compiled)."""
    # The anonymous namespace's mangled name hashes the source's path (the worktree's differs).
    ptx = INTERNAL.sub("_INTERNAL_", ANON.sub("_GLOBAL__N_", ptx))
    out = {}
    for part in KERNEL.split(ptx)[1:]:
        m = NAME.match(part)
        if m:
            body = re.sub(r"\$L__BB\d+_", "$L__BB_", part)
            out[m.group(1)] = re.sub(r"\.reg \.\w+\s+%\w+<\d+>;", "", body)
    return out


def same_up_to_renaming(a, b):
    """True when one consistent one-to-one renaming of virtual registers turns a into b."""
    la, lb = a.splitlines(), b.splitlines()
    if len(la) != len(lb):
        return False
    fwd, back = {}, {}
    for x, y in zip(la, lb):
        if REG.sub("%", x) != REG.sub("%", y):
            return False
        for rx, ry in zip(REG.finditer(x), REG.finditer(y)):
            u, v = rx.group(0), ry.group(0)
            if fwd.setdefault(u, v) != v or back.setdefault(v, u) != u:
                return False
    return True


def compile_ptx(nvcc, root, source):
    with tempfile.NamedTemporaryFile(suffix=".ptx", delete=False) as f:
        out = f.name
    cmd = [nvcc, "-I" + os.path.join(root, "src"), *FLAGS, os.path.join(root, source), "-o", out]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit("nvcc failed on %s (%s):\n%s" % (source, root, r.stdout[-4000:]))
    with open(out) as f:
        text = f.read()
    os.unlink(out)
    return kernels(text)


def report(label, a, b, show):
    same, differ = 0, []
    for name in sorted(a):
        if name not in b:
            print("  only in the first:", name)
        elif a[name] == b[name] or same_up_to_renaming(a[name], b[name]):
            same += 1
        else:
            differ.append(name)
    for name in sorted(set(b) - set(a)):
        print("  only in the second:", name)
    print("%s: %d of %d kernels the same, %d differ" % (label, same, len(a), len(differ)))
    for name in differ:
        d = list(difflib.unified_diff(normalise(a[name]).splitlines(), normalise(b[name]).splitlines(), lineterm="",
                                      n=0))
        print("  differs: %s (%d diff lines)" % (name, len(d)))
        for line in d[2 : 2 + show]:
            print("    " + line)
    return differ


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("base", help="git revision to compare against")
    ap.add_argument("sources", nargs="*", default=["src/backend/cuda/attention.cu"])
    ap.add_argument("--twice", action="store_true", help="also compile the working tree twice (cicc's own noise)")
    ap.add_argument("--show", type=int, default=8, help="diff lines shown per differing kernel")
    args = ap.parse_args()
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc):
        sys.exit("nvcc not found (PATH or /usr/local/cuda/bin)")
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], stdout=subprocess.PIPE, text=True,
                          check=True).stdout.strip()
    base_dir = tempfile.mkdtemp(prefix="ptx_base_")
    subprocess.run(["git", "-C", root, "worktree", "add", "--detach", base_dir, args.base], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for src in args.sources:
            base = compile_ptx(nvcc, base_dir, src)
            work = compile_ptx(nvcc, root, src)
            report("%s: %s vs working tree" % (src, args.base), base, work, args.show)
            if args.twice:
                report("%s: working tree vs itself" % src, work, compile_ptx(nvcc, root, src), args.show)
    finally:
        subprocess.run(["git", "-C", root, "worktree", "remove", "--force", base_dir], check=False)


if __name__ == "__main__":
    main()
