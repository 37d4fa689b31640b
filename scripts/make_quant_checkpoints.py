#!/usr/bin/env python3
"""Make tiny quantised checkpoints in the published layouts and their golden logits (issue 27).

Runs where torch (>= 2.1, for float8_e4m3fn) and transformers 5.x are installed; needs no
network and no quantisation package. On the GPU machine:

    python3 scripts/make_quant_checkpoints.py --out tests/data/tiny-quant [--only NAME ...] [--native-check]

For each checkpoint (Llama or Qwen3, hidden 128, 2 layers, 4 heads of 32, 2 KV heads, ffn 256,
vocab 256, < 2 MB): random weights from a fixed seed, scaled like scripts/make_tiny_models.py
(q/k projections or q/k norms scaled up, the final norm scaled so the median max probability is
~0.3), every weight rounded to bf16 (the "bf16 checkpoint"), then the seven projections of each
layer quantised here with torch and written in the method's published layout:

  fp8 block-wise (Qwen3-*-FP8 / DeepSeek-V3): `weight` F8_E4M3 [out, in], `weight_scale_inv`
      [ceil(out/128), ceil(in/128)] (amax/448 per 128x128 block); quant_method "fp8",
      weight_block_size [128, 128]. w = fp8 * weight_scale_inv.
  compressed-tensors float-quantized FP8: `weight` F8_E4M3, `weight_scale` [out, 1] (channel) or
      [1] (tensor), amax/448; w = fp8 * weight_scale.
  AWQ GEMM (AutoAWQ): `qweight` I32 [in, out/8] packing output columns 8j + [0,2,4,6,1,3,5,7][i]
      into bits 4i, `qzeros` I32 [in/g, out/8] packed alike, `scales` F16 [in/g, out]; min-max
      asymmetric per group of 128 input rows. w = (q - z) * s.
  GPTQ (AutoGPTQ v1 "gptq" format): `qweight` I32 [in/8, out] packing input rows 8j + i into bits
      4i, `qzeros` I32 [n_groups, out/8] packing output columns alike and holding (z - 1) mod 16,
      `scales` F16 [n_groups, out], `g_idx` I32 [in]; GPTQ's min-max grid (the range always holds
      0; sym: z = 8, s = 2 max|w| / 15); desc_act true: the input rows are assigned to groups in a
      seeded random order (what act-order leaves in g_idx). w = (q - z) * s with the group g_idx[k].

The goldens are transformers' own fp32 forward (eager attention) on the DEQUANTISED weights: the
script writes a float32 copy of the model whose projections are the exact dequantisation (one fp32
multiply of exact operands, as ninfer's reference does), reloads it with from_pretrained and stores
golden.json in tests/data/tiny's format (ids, positions, logits at those positions from one
forward, 8 greedy tokens with the KV cache). It also unpacks every written tensor again with a
second, independent decoder (AutoAWQ's reverse order and shifts, AutoGPTQ's `(zeros + 1) & 15`)
and checks it gives the same matrix bit for bit.

--native-check additionally loads each quantised directory with transformers' own quantisation
integration when the needed package / GPU is present (FineGrainedFP8, compressed-tensors, AWQ,
GPTQ), and logs how far its logits are from the golden (informational: those kernels compute in
bf16/fp16; a layout mistake shows as a relative error ~1, not ~1e-2).

tests/backend/test_quant_goldens.cpp checks ninfer's CPU logits against these goldens to 1e-3.
"""
import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
import traceback

import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_models as mtm  # noqa: E402  (weight init, final-norm tuning, fp32 reload, greedy)

from safetensors.torch import save_file  # noqa: E402

VOCAB = 256
SHORT_LEN = 12
LONG_LEN = 96
GREEDY_NEW = 8
PROJ = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
        "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
E4M3_MAX = 448.0
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
AWQ_REVERSE_ORDER = [0, 4, 1, 5, 2, 6, 3, 7]


def log(*a):
    print(*a, flush=True)


def base_cfg(cls):
    c = dict(vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, head_dim=32, rms_norm_eps=1e-6,
             tie_word_embeddings=False, max_position_embeddings=512, bos_token_id=1, eos_token_id=2,
             pad_token_id=0, hidden_act="silu", attention_bias=False)
    if cls == "LlamaForCausalLM":
        c["mlp_bias"] = False
    return c


def specs():
    return [
        dict(name="qwen3-fp8-block", cls="Qwen3ForCausalLM", method="fp8-block", scale_dtype="bf16", seed=2701,
             about="fp8 block-wise e4m3, weight_block_size [128, 128], bf16 weight_scale_inv (Qwen3-*-FP8 layout)"),
        dict(name="llama-fp8-block", cls="LlamaForCausalLM", method="fp8-block", scale_dtype="f32", seed=2702,
             about="fp8 block-wise e4m3, weight_block_size [128, 128], f32 weight_scale_inv (DeepSeek-V3 layout)"),
        dict(name="llama-ct-fp8-channel", cls="LlamaForCausalLM", method="ct-channel", seed=2703,
             about="compressed-tensors float-quantized FP8, strategy channel (weight_scale [out, 1])"),
        dict(name="qwen3-ct-fp8-tensor", cls="Qwen3ForCausalLM", method="ct-tensor", seed=2704,
             about="compressed-tensors float-quantized FP8, strategy tensor (weight_scale [1])"),
        dict(name="llama-awq", cls="LlamaForCausalLM", method="awq", group=128, seed=2705,
             about="AWQ GEMM, 4 bits, group 128, zero points (AutoAWQ packing order)"),
        dict(name="qwen3-gptq-sym", cls="Qwen3ForCausalLM", method="gptq", group=128, sym=True, desc_act=False,
             seed=2706, about="GPTQ v1, 4 bits, group 128, sym, desc_act false"),
        dict(name="llama-gptq-asym-g32", cls="LlamaForCausalLM", method="gptq", group=32, sym=False,
             desc_act=False, seed=2707, about="GPTQ v1, 4 bits, group 32, asym, desc_act false"),
        dict(name="qwen3-gptq-asym-act-g64", cls="Qwen3ForCausalLM", method="gptq", group=64, sym=False,
             desc_act=True, seed=2708, about="GPTQ v1, 4 bits, group 64, asym, desc_act true (g_idx)"),
        dict(name="llama-gptq-sym-act", cls="LlamaForCausalLM", method="gptq", group=128, sym=True,
             desc_act=True, seed=2709, about="GPTQ v1, 4 bits, group 128, sym, desc_act true (g_idx)"),
    ]


def quant_config(spec):
    m = spec["method"]
    if m == "fp8-block":
        return {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
    if m.startswith("ct-"):
        return {"quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed",
                "ignore": ["lm_head"], "kv_cache_scheme": None, "global_compression_ratio": None,
                "config_groups": {"group_0": {
                    "targets": ["Linear"], "input_activations": None, "output_activations": None,
                    "weights": {"num_bits": 8, "type": "float", "symmetric": True, "dynamic": False,
                                "strategy": m[3:], "group_size": None, "block_structure": None,
                                "observer": "minmax", "actorder": None}}}}
    if m == "awq":
        return {"quant_method": "awq", "bits": 4, "group_size": spec["group"], "zero_point": True, "version": "gemm",
                "modules_to_not_convert": None}
    if m == "gptq":
        return {"quant_method": "gptq", "bits": 4, "group_size": spec["group"], "desc_act": spec["desc_act"],
                "sym": spec["sym"], "damp_percent": 0.01, "true_sequential": True, "static_groups": False,
                "checkpoint_format": "gptq", "lm_head": False}
    raise ValueError(m)


# ----------------------------------------------------------------------------------------------
# quantisers: each returns ({tensor suffix: tensor}, dequantised fp32 W [out, in])
# ----------------------------------------------------------------------------------------------

def to_fp8(x):
    # NOTE: clamp first: torch's float32 -> float8_e4m3fn cast gives NaN past the range, and
    # amax / (amax / 448) may round to a hair above 448.
    return x.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)


def round_scale(s, dtype):
    return s.to(torch.bfloat16).float() if dtype == "bf16" else s.float()


def quant_fp8_grid(w, br, bc, scale_dtype):
    """Scales per br x bc block (the last blocks partial); returns codes, scales [sr, sc], deq."""
    out, inn = w.shape
    sr, sc = math.ceil(out / br), math.ceil(inn / bc)
    amax = torch.zeros(sr, sc)
    for i in range(sr):
        for j in range(sc):
            amax[i, j] = w[i * br:(i + 1) * br, j * bc:(j + 1) * bc].abs().max()
    s = round_scale(amax / E4M3_MAX, scale_dtype)
    s_full = s.repeat_interleave(br, 0)[:out].repeat_interleave(bc, 1)[:, :inn]
    safe = torch.where(s_full == 0, torch.ones_like(s_full), s_full)
    q = to_fp8(w / safe)
    deq = q.float() * s_full  # one fp32 multiply of exact operands
    return q, s, deq


def quant_fp8_block(w, spec):
    q, s, deq = quant_fp8_grid(w, 128, 128, spec.get("scale_dtype", "f32"))
    sd = torch.bfloat16 if spec.get("scale_dtype") == "bf16" else torch.float32
    return {"weight": q, "weight_scale_inv": s.to(sd)}, deq


def quant_ct(w, spec):
    out, inn = w.shape
    if spec["method"] == "ct-channel":
        q, s, deq = quant_fp8_grid(w, 1, inn, "bf16")
        return {"weight": q, "weight_scale": s.reshape(out, 1).to(torch.bfloat16)}, deq
    q, s, deq = quant_fp8_grid(w, out, inn, "bf16")
    return {"weight": q, "weight_scale": s.reshape(1).to(torch.bfloat16)}, deq


def pack_int32(cols):
    """cols: list of 8 int64 tensors of 4-bit values; nibble i = cols[i]; returns int32 (two's complement)."""
    acc = torch.zeros_like(cols[0], dtype=torch.int64)
    for i, c in enumerate(cols):
        acc |= (c.to(torch.int64) & 0xF) << (4 * i)
    acc = torch.where(acc >= 2 ** 31, acc - 2 ** 32, acc)
    return acc.to(torch.int32)


def quant_awq(w, spec):
    """AutoAWQ's min-max asymmetric grid per group of input rows, fp16 scales."""
    g = spec["group"]
    out, inn = w.shape
    ng = inn // g
    wg = w.reshape(out, ng, g)
    mx, mn = wg.amax(-1), wg.amin(-1)
    s = ((mx - mn).clamp(min=1e-5) / 15).to(torch.float16).float()     # [out, ng]
    z = (-torch.round(mn / s)).clamp(0, 15)                              # [out, ng]
    q = (torch.round(wg / s[..., None]) + z[..., None]).clamp(0, 15)     # [out, ng, g]
    deq = ((q - z[..., None]) * s[..., None]).reshape(out, inn)
    iw = q.reshape(out, inn).to(torch.int64).t().contiguous()            # [in, out]
    izr = z.to(torch.int64).t().contiguous()                             # [ng, out]
    qweight = pack_int32([iw[:, AWQ_ORDER[i]::8] for i in range(8)])     # [in, out/8]
    qzeros = pack_int32([izr[:, AWQ_ORDER[i]::8] for i in range(8)])    # [ng, out/8]
    return {"qweight": qweight, "qzeros": qzeros, "scales": s.t().contiguous().to(torch.float16)}, deq


def quant_gptq(w, spec, gen):
    """GPTQ's quantizer grid (round-to-nearest here, no Hessian updates: the layout is the point)."""
    g, sym = spec["group"], spec["sym"]
    out, inn = w.shape
    ng = inn // g
    if spec["desc_act"]:
        perm = torch.randperm(inn, generator=gen)
        g_idx = torch.empty(inn, dtype=torch.int64)
        g_idx[perm] = torch.arange(inn) // g
    else:
        g_idx = torch.arange(inn) // g
    s = torch.zeros(out, ng)
    z = torch.zeros(out, ng)
    for gi in range(ng):
        x = w[:, g_idx == gi]
        xmin = torch.minimum(x.amin(1), torch.zeros(out))
        xmax = torch.maximum(x.amax(1), torch.zeros(out))
        if sym:
            xmax = torch.maximum(xmin.abs(), xmax)
            xmin = torch.where(xmin < 0, -xmax, xmin)
        both0 = (xmin == 0) & (xmax == 0)
        xmin = torch.where(both0, -torch.ones_like(xmin), xmin)
        xmax = torch.where(both0, torch.ones_like(xmax), xmax)
        sc = ((xmax - xmin) / 15).to(torch.float16).float()
        s[:, gi] = sc
        z[:, gi] = torch.full_like(sc, 8.0) if sym else torch.round(-xmin / sc).clamp(0, 15)
    sk, zk = s[:, g_idx], z[:, g_idx]                                  # per element [out, in]
    q = (torch.round(w / sk) + zk).clamp(0, 15)
    deq = (q - zk) * sk
    qt = q.to(torch.int64).t().contiguous()                             # [in, out]
    qweight = pack_int32([qt[i::8] for i in range(8)])                  # [in/8, out]
    zst = ((z.to(torch.int64) - 1) & 0xF).t().contiguous()             # v1 stores z - 1
    qzeros = pack_int32([zst[:, i::8] for i in range(8)])               # [ng, out/8]
    return {"qweight": qweight, "qzeros": qzeros, "scales": s.t().contiguous().to(torch.float16),
            "g_idx": g_idx.to(torch.int32)}, deq


# ----------------------------------------------------------------------------------------------
# an independent decoder of the written tensors (the published dequantisation recipes)
# ----------------------------------------------------------------------------------------------

def unpack_nibbles(x):
    """int32 [..., n] -> int64 [..., n, 8] (nibble i at index i), AutoAWQ/AutoGPTQ's shift loop."""
    shifts = torch.arange(0, 32, 4)
    return (x.to(torch.int64)[..., None] >> shifts) & 0xF


def dequant_published(t, spec, out, inn):
    m = spec["method"]
    if m == "fp8-block":
        s = t["weight_scale_inv"].float().repeat_interleave(128, 0)[:out].repeat_interleave(128, 1)[:, :inn]
        return t["weight"].float() * s
    if m.startswith("ct-"):
        return t["weight"].float() * t["weight_scale"].float()  # [out, 1] or [1] broadcast
    if m == "awq":
        iw = unpack_nibbles(t["qweight"]).reshape(inn, out // 8, 8)[:, :, AWQ_REVERSE_ORDER].reshape(inn, out)
        iz = unpack_nibbles(t["qzeros"]).reshape(-1, out // 8, 8)[:, :, AWQ_REVERSE_ORDER].reshape(-1, out)
        g = spec["group"]
        zf = iz.repeat_interleave(g, 0)
        sf = t["scales"].float().repeat_interleave(g, 0)
        return ((iw - zf).float() * sf).t()
    if m == "gptq":
        iw = unpack_nibbles(t["qweight"].t()).reshape(out, inn).t()     # [in, out]: row 8j+i in nibble i
        iz = (unpack_nibbles(t["qzeros"]).reshape(-1, out) + 1) & 0xF   # AutoGPTQ v1: zeros + 1
        gi = t["g_idx"].to(torch.int64)
        return ((iw - iz[gi]).float() * t["scales"].float()[gi]).t()
    raise ValueError(m)


# ----------------------------------------------------------------------------------------------

def set_bf16(model):
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).float())


@torch.no_grad()
def make_one(spec, outdir, native_check):
    t0 = time.time()
    name = spec["name"]
    log(f"=== {name}: {spec['cls']} seed {spec['seed']} ({spec['about']})")
    torch.manual_seed(spec["seed"])
    model_cls = getattr(transformers, spec["cls"])
    cfg = model_cls.config_class(**base_cfg(spec["cls"]))
    try:
        cfg._attn_implementation = "eager"
    except Exception:
        pass
    model = model_cls(cfg).float().eval()
    gemma = mtm.init_weights(model, spec["seed"])
    set_bf16(model)  # the bf16 checkpoint that gets quantised
    gen = torch.Generator().manual_seed(spec["seed"] + 50)
    params = dict(model.named_parameters())
    quant_tensors = {}
    worst = 0.0
    for l in range(cfg.num_hidden_layers):
        for proj in PROJ:
            base = f"model.layers.{l}.{proj}"
            w = params[base + ".weight"].detach().clone()
            m = spec["method"]
            if m == "fp8-block":
                t, deq = quant_fp8_block(w, spec)
            elif m.startswith("ct-"):
                t, deq = quant_ct(w, spec)
            elif m == "awq":
                t, deq = quant_awq(w, spec)
            else:
                t, deq = quant_gptq(w, spec, gen)
            check = dequant_published(t, spec, *w.shape)
            if not torch.equal(check, deq):
                raise RuntimeError(f"{base}: the independent decoder disagrees "
                                   f"(max |d| {(check - deq).abs().max().item():.3g})")
            if torch.isnan(deq).any():
                raise RuntimeError(f"{base}: NaN in the dequantised weights")
            worst = max(worst, ((deq - w).abs().max() / w.abs().max()).item())
            for k, v in t.items():
                quant_tensors[f"{base}.{k}"] = v.contiguous()
            params[base + ".weight"].copy_(deq)
    log(f"    quantised {len(PROJ) * cfg.num_hidden_layers} projections; worst max|dW|/max|W| {worst:.4f}; "
        f"independent decoder: bit-identical")
    tune_ids = torch.randint(3, VOCAB, (SHORT_LEN,), generator=torch.Generator().manual_seed(spec["seed"] + 7)).tolist()
    s = mtm.tune_final_norm(model, tune_ids, gemma)
    fn = mtm.final_norm_name(model)
    params[fn].copy_(params[fn].to(torch.bfloat16).float())
    log(f"    final-norm scale {s:.4f}")

    # The quantised checkpoint: projections in the method's layout, the rest bf16.
    d = os.path.join(outdir, name)
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    dense = {}
    for n, p in model.state_dict().items():
        base = n[:-len(".weight")] if n.endswith(".weight") else None
        if base and any(base.endswith(pr) for pr in PROJ) and ".layers." in base:
            continue
        dense[n] = p.detach().to(torch.bfloat16).contiguous()
    save_file({**dense, **quant_tensors}, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    cfg_json = cfg.to_dict()
    for k in ("_attn_implementation", "_attn_implementation_internal", "transformers_version"):
        cfg_json.pop(k, None)
    cfg_json["architectures"] = [spec["cls"]]
    cfg_json["dtype"] = "bfloat16"
    cfg_json["quantization_config"] = quant_config(spec)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg_json, f, indent=2, sort_keys=True)
        f.write("\n")

    # The oracle: transformers on a float32 copy of the dequantised weights.
    tmp = tempfile.mkdtemp(prefix=f"dequant-{name}-")
    try:
        model.save_pretrained(tmp, **mtm.get_save_kwargs())
        m32, info = mtm.load_fp32(model_cls, tmp)
        bad = {k: v for k, v in info.items() if v}
        log(f"    dequantised fp32 copy reload: {bad if bad else 'clean'}")
        sd, sd32 = model.state_dict(), m32.state_dict()
        mism = [k for k in sd if k in sd32 and not torch.equal(sd[k].float(), sd32[k])]
        if mism:
            raise RuntimeError(f"fp32 reload differs: {mism[:5]}")
        rng = torch.Generator().manual_seed(spec["seed"] + 100)
        gold = dict(architecture=spec["cls"], transformers_version=transformers.__version__, torch_version=torch.__version__,
                    seed=spec["seed"], about=spec["about"], quantization_config=quant_config(spec),
                    oracle="transformers fp32 eager forward on the dequantised weights (float32 copy)", prompts=[])
        for kind, L in (("short", SHORT_LEN), ("long", LONG_LEN)):
            best = None
            for attempt in range(10):
                ids = torch.randint(3, VOCAB, (L,), generator=rng).tolist()
                g_manual, gaps = mtm.greedy_manual(m32, ids, GREEDY_NEW)
                score = (min(gaps) >= 0.05, len(set(g_manual)) >= 4, min(gaps))
                if best is None or score > best[3]:
                    best = (ids, g_manual, attempt, score)
                if score[0] and score[1]:
                    break
            ids, g_manual, attempt, score = best
            mtm.stats(m32, ids, kind)
            logits = mtm.fwd_logits(m32, ids)
            pos = mtm.positions_for(L, None)
            nc = mtm.greedy_nocache(m32, ids, GREEDY_NEW)
            log(f"    [{kind}] greedy {g_manual}; no-cache {'==' if nc == g_manual else '!= ' + str(nc)}; "
                f"min top1-top2 gap {score[2]:.3f} (prompt attempt {attempt})")
            gold["prompts"].append(dict(ids=ids, positions=pos,
                                        logits=[[mtm.fmt6(v) for v in logits[q].tolist()] for q in pos],
                                        greedy_ids=g_manual))
        with open(os.path.join(d, "golden.json"), "w") as f:
            json.dump(gold, f, separators=(",", ":"))
            f.write("\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sizes = {f: os.path.getsize(os.path.join(d, f)) for f in sorted(os.listdir(d))}
    total = sum(sizes.values())
    log(f"    files {sizes} total {total / 1024:.0f} KiB; {time.time() - t0:.1f}s")
    if total > 2 * 1024 * 1024:
        raise RuntimeError(f"{name}: {total} bytes, over the 2 MB budget")
    if native_check:
        native(d, spec, gold)


def native(d, spec, gold):
    """transformers' own loader for the method, where its package / GPU is present (informational)."""
    try:
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        m = transformers.AutoModelForCausalLM.from_pretrained(d, device_map=dev, dtype=torch.bfloat16)
        m.eval()
        errs = []
        for p in gold["prompts"]:
            with torch.no_grad():
                lg = m(input_ids=torch.tensor([p["ids"]], device=dev), use_cache=False).logits[0].float().cpu()
            for q, want in zip(p["positions"], p["logits"]):
                w = torch.tensor(want)
                errs.append(((lg[q] - w).abs().max() / w.abs().max()).item())
        log(f"    native {spec['method']} load ({dev}, bf16 compute): max rel err vs golden {max(errs):.4f} "
            f"(bf16 kernels: ~1e-2 expected; ~1 would mean a layout mismatch)")
    except Exception as e:
        log(f"    native {spec['method']} load skipped: {type(e).__name__}: {str(e)[:200]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/data/tiny-quant")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--native-check", action="store_true",
                    help="also load each checkpoint with transformers' quantisation integration (needs its package)")
    a = ap.parse_args()
    if not hasattr(torch, "float8_e4m3fn"):
        sys.exit("torch has no float8_e4m3fn (needs torch >= 2.1)")
    log(f"transformers {transformers.__version__}, torch {torch.__version__}, python {sys.version.split()[0]}")
    os.makedirs(a.out, exist_ok=True)
    failed = []
    for spec in specs():
        if a.only and spec["name"] not in a.only:
            continue
        try:
            make_one(spec, a.out, a.native_check)
        except Exception:
            traceback.print_exc(file=sys.stdout)
            failed.append(spec["name"])
            d = os.path.join(a.out, spec["name"])
            if os.path.exists(d):
                shutil.rmtree(d)
    log(f"FAILED: {failed}" if failed else "all checkpoints made")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
