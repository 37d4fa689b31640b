"""Instruction counts of one kernel's loops from `cuobjdump -sass` output: for each function
whose name matches PATTERN, every backward branch (a loop) with the number of instructions
between its target label and the branch, and the opcode histogram of the largest loop
(forward-jumped blocks inside it, such as a rarely taken rescale, are counted too: compare
two builds with the same tool, not with hand counts).

usage: cuobjdump -sass ninfer | python3 bench/sass_loops.py 'decode_comp_kernelILi128ELi6ELi1E' [N_TOP]
"""
import collections
import re
import sys


def functions(lines):
    name, body = None, []
    for line in lines:
        m = re.search(r"Function : (\S+)", line)
        if m:
            if name:
                yield name, body
            name, body = m.group(1), []
        elif name:
            body.append(line)
    if name:
        yield name, body


def parse(body):
    """[(index, opcode, text)] of the instructions, and {target: index}: a branch target is a
    label (`.L_x_N:` lines) or an address (the `/*addr*/` of each instruction), by version."""
    insts, labels = [], {}
    for line in body:
        lm = re.match(r"\s*\.(L_x_\d+):", line)
        if lm:
            labels[lm.group(1)] = len(insts)
            continue
        im = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if not im:
            continue
        labels[hex(int(im.group(1), 16))] = len(insts)
        text = im.group(2).strip()
        op = re.sub(r"^@!?U?P[T0-9]+\s+", "", text).split()[0]
        insts.append((len(insts), op.split(".")[0], text))
    return insts, labels


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    pat = re.compile(sys.argv[1])
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    for name, body in functions(sys.stdin):
        if not pat.search(name):
            continue
        insts, labels = parse(body)
        loops = []
        for i, op, text in insts:
            bm = re.search(r"\bBRA\b.*?(?:\.(L_x_\d+)|\b(0x[0-9a-f]+)\s*$)", text)
            if not bm:
                continue
            tgt = bm.group(1) or hex(int(bm.group(2), 16))
            if tgt in labels and labels[tgt] <= i:
                loops.append((i - labels[tgt] + 1, labels[tgt], i))
        print(f"{name}: {len(insts)} instructions, {len(loops)} loops")
        for n, a, b in sorted(loops, reverse=True)[:4]:
            print(f"  loop [{a}, {b}]: {n} instructions")
        if loops:
            n, a, b = max(loops)
            hist = collections.Counter(op for i, op, _ in insts[a:b + 1])
            print("  largest loop: " + ", ".join(f"{op} {c}" for op, c in hist.most_common(top)))


if __name__ == "__main__":
    main()
