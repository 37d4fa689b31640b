"""Peer baseline: one decode step of attention through PyTorch SDPA on a contiguous bf16 cache
(the same method as ../shared/baselines/peer_decode_attention.py: one query token per
sequence, GQA, median of 50 event-timed repeats after 5 warm-ups), over the shapes that
`ninfer bench --attention` measures. Prints a table and, with --json FILE, writes the rows.

usage: python3 bench/sdpa_decode_attention.py --shapes 32/8/128,16/2/256 --ctx 8192,32768,131072 --batch 1,8 [--json F]
       [--cold-l2]   (overwrite a buffer of twice the L2 size before each timed repeat, as
                      `ninfer bench --attention --cold-l2` does; default: back-to-back repeats)
       [--graph]     (20 steps captured in one CUDA graph, replayed back to back, time per step,
                      as `ninfer bench --attention --graph`)
"""
import argparse, json
import torch, torch.nn.functional as F


def bench(fn, reps=50, flush=None):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(True), torch.cuda.Event(True)
    ts = []
    for _ in range(reps):
        if flush is not None:
            flush.zero_()
        s.record(); fn(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[len(ts) // 2]


GRAPH_STEPS = 20


def graph_of(step, n):
    """n calls of step captured in one CUDA graph (warmed up on a side stream first)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n):
            step()
    return g


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="32/8/128,16/2/256")
    ap.add_argument("--ctx", default="8192,32768,131072")
    ap.add_argument("--batch", default="1,8")
    ap.add_argument("--json", default="")
    ap.add_argument("--cold-l2", action="store_true")
    ap.add_argument("--graph", action="store_true")
    a = ap.parse_args()
    if a.graph and a.cold_l2:
        ap.error("--graph and --cold-l2 do not combine (the graph replays steps back to back)")
    rows = []
    print(f"device {torch.cuda.get_device_name()}")
    flush = None
    if a.cold_l2:
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        flush = torch.empty(max(2 * l2, 64 << 20), dtype=torch.uint8, device="cuda")
        print(f"L2 ({l2 >> 20} MiB) overwritten before each repeat")
    for shape in a.shapes.split(","):
        hq, hkv, d = (int(x) for x in shape.split("/"))
        for B in (int(x) for x in a.batch.split(",")):
            for L in (int(x) for x in a.ctx.split(",")):
                q = torch.randn(B, hq, 1, d, dtype=torch.bfloat16, device="cuda")
                k = torch.randn(B, hkv, L, d, dtype=torch.bfloat16, device="cuda")
                v = torch.randn_like(k)
                best = None
                for name, be in (("flash", torch.nn.attention.SDPBackend.FLASH_ATTENTION),
                                 ("cudnn", torch.nn.attention.SDPBackend.CUDNN_ATTENTION)):
                    try:
                        with torch.nn.attention.sdpa_kernel(be):
                            step = lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                            if a.graph:
                                ms = bench(graph_of(step, GRAPH_STEPS).replay, reps=25) / GRAPH_STEPS
                            else:
                                ms = bench(step, flush=flush)
                    except Exception as ex:  # a backend without a kernel for this shape
                        print(f"  {name} unsupported for {shape} B{B} L{L}: {str(ex)[:60]}")
                        continue
                    gb = 2 * k.numel() * 2 / ms / 1e6
                    rows.append(dict(n_heads=hq, n_kv_heads=hkv, head_dim=d, batch=B, ctx=L, backend=name,
                                     median_ms=ms, gbps=gb, cold_l2=a.cold_l2, graph=a.graph))
                    print(f"B{B} hq{hq} hkv{hkv} d{d} {L:7d} {ms:8.4f} ms {gb:7.0f} GB/s {name}")
                del q, k, v
                torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f)


if __name__ == "__main__":
    main()
