"""Peer baseline for prefill attention: a whole prompt of N tokens as one causal chunk through
PyTorch SDPA (bf16 q/k/v [1, heads, N, head_dim], GQA), with the flash (FlashAttention-2) and
cuDNN backends, over the shapes and prompt lengths `ninfer bench --attention --ctx N --queries N`
measures (bench/gpu_session.sh pattn). CUDA events around each call, median of the repeats
after warm-ups (fewer of both at long prompts: one 128K call takes seconds). TFLOP/s count the
causal FLOPs, 2 * 2 * n_heads * head_dim * N^2 / 2. Prints a table; --json FILE writes the rows.

usage: python3 bench/sdpa_prefill_attention.py --shapes 32/8/128,16/2/256 --ctx 4096,32768,131072 [--json F]
"""
import argparse, json
import torch, torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}


def bench(fn, reps, warm):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(True), torch.cuda.Event(True)
    ts = []
    for _ in range(reps):
        s.record(); fn(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[len(ts) // 2]


def causal_tflops(nh, d, n, ms):
    return 2 * 2 * nh * d * n * n / 2 / (ms * 1e-3) / 1e12


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="32/8/128,16/2/256")
    ap.add_argument("--ctx", default="4096,32768,131072")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    rows = []
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"{'shape':>12} {'N':>7} {'backend':>7} {'ms':>10} {'TFLOP/s':>8} gqa")
    for shape in a.shapes.split(","):
        nh, nkv, d = (int(x) for x in shape.split("/"))
        for n in (int(x) for x in a.ctx.split(",")):
            g = torch.Generator(device="cuda").manual_seed(1234)
            q = torch.randn(1, nh, n, d, device="cuda", dtype=torch.bfloat16, generator=g)
            k = torch.randn(1, nkv, n, d, device="cuda", dtype=torch.bfloat16, generator=g)
            v = torch.randn(1, nkv, n, d, device="cuda", dtype=torch.bfloat16, generator=g)
            reps, warm = (20, 5) if n <= 8192 else ((7, 2) if n <= 32768 else (3, 1))
            for name, be in BACKENDS.items():
                ms, how = None, ""
                for gqa in ("enable_gqa", "expanded"):
                    try:
                        if gqa == "enable_gqa":
                            kk, vv, kw = k, v, {"enable_gqa": True}
                        else:  # the backend takes no GQA: K/V repeated to every q head (not timed)
                            kk = k.repeat_interleave(nh // nkv, dim=1)
                            vv = v.repeat_interleave(nh // nkv, dim=1)
                            kw = {}
                        with sdpa_kernel([be]):
                            fn = lambda: F.scaled_dot_product_attention(q, kk, vv, is_causal=True, **kw)
                            fn()
                            ms = bench(fn, reps, warm)
                        how = gqa
                        break
                    except RuntimeError as ex:
                        how = f"failed: {str(ex).splitlines()[0][:80]}"
                        torch.cuda.synchronize()
                if ms is None:
                    print(f"{shape:>12} {n:>7} {name:>7} {'-':>10} {'-':>8} {how}")
                    continue
                tf = causal_tflops(nh, d, n, ms)
                print(f"{shape:>12} {n:>7} {name:>7} {ms:>10.3f} {tf:>8.1f} {how}", flush=True)
                rows.append({"backend": name, "n_heads": nh, "n_kv_heads": nkv, "head_dim": d, "ctx": n,
                             "median_ms": ms, "tflops": tf, "gqa": how, "repeats": reps})
            del q, k, v
            torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"bench": "sdpa_prefill", "device": torch.cuda.get_device_name(), "rows": rows}, f)


if __name__ == "__main__":
    main()
