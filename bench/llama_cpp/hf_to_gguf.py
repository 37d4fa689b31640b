#!/usr/bin/env python3
"""Convert a Hugging Face Qwen3 or Llama safetensors checkpoint to a GGUF file.

Pure Python standard library (no numpy, no torch). Weights are copied as
stored (bf16 stays bf16, f16 stays f16, f32 stays f32); 1-D tensors (the
RMSNorm weights) are written as f32, which is what llama.cpp's CPU backend
expects of them. The tokenizer must be a byte-level BPE tokenizer.json
(GGUF tokenizer model "gpt2").

    python3 bench/llama_cpp/hf_to_gguf.py MODEL_DIR OUT.gguf [--pre qwen2]

Layout written (GGUF v3): magic "GGUF", version, tensor count, metadata
count, the metadata key/value pairs, the tensor infos (name, dims innermost
first, ggml type, offset into the data section), padding to the alignment,
then the tensor data, each tensor starting on an aligned offset.
"""

import argparse
import json
import os
import struct
import sys

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
ALIGNMENT = 32

# gguf metadata value types
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, \
    T_STRING, T_ARRAY, T_UINT64, T_INT64, T_FLOAT64 = range(13)

# ggml tensor types
GGML_F32, GGML_F16, GGML_BF16 = 0, 1, 30
# llama_ftype
FTYPE_ALL_F32, FTYPE_MOSTLY_F16, FTYPE_MOSTLY_BF16 = 0, 1, 32

# token types (llama_token_type)
TOK_NORMAL, TOK_UNKNOWN, TOK_CONTROL, TOK_USER_DEFINED, TOK_UNUSED, TOK_BYTE = 1, 2, 3, 4, 5, 6

ST_DTYPES = {"BF16": (GGML_BF16, 2), "F16": (GGML_F16, 2), "F32": (GGML_F32, 4)}

ARCHS = {"Qwen3ForCausalLM": "qwen3", "LlamaForCausalLM": "llama"}


def die(msg):
    print(f"hf_to_gguf: error: {msg}", file=sys.stderr)
    sys.exit(1)


# ---------------------------------------------------------------- safetensors

class SrcTensor:
    def __init__(self, name, dtype, shape, path, begin, end):
        self.name, self.dtype, self.shape = name, dtype, shape
        self.path, self.begin, self.end = path, begin, end

    def read(self):
        with open(self.path, "rb") as f:
            f.seek(self.begin)
            data = f.read(self.end - self.begin)
        if len(data) != self.end - self.begin:
            die(f"{self.path}: truncated data for {self.name}")
        return data


def read_safetensors_header(path):
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            die(f"{path}: not a safetensors file")
        (n,) = struct.unpack("<Q", raw)
        if n > 100 * 1024 * 1024:
            die(f"{path}: implausible header size {n}")
        header = json.loads(f.read(n))
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = info["dtype"]
        if dtype not in ST_DTYPES:
            die(f"{path}: tensor {name} has dtype {dtype}; only BF16, F16 and F32 are supported")
        begin, end = info["data_offsets"]
        numel = 1
        for d in info["shape"]:
            numel *= d
        if end - begin != numel * ST_DTYPES[dtype][1]:
            die(f"{path}: tensor {name}: byte size does not match shape {info['shape']}")
        out[name] = SrcTensor(name, dtype, list(info["shape"]), path, base + begin, base + end)
    return out


def load_tensors(model_dir):
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    elif os.path.exists(os.path.join(model_dir, "model.safetensors")):
        files = ["model.safetensors"]
    else:
        die(f"{model_dir}: no model.safetensors or model.safetensors.index.json")
    tensors = {}
    for fn in files:
        p = os.path.join(model_dir, fn)
        if not os.path.exists(p):
            die(f"{p}: listed in the index but missing")
        tensors.update(read_safetensors_header(p))
    return tensors


# ---------------------------------------------------------------- conversions

def bf16_to_f32(data):
    """bf16 -> f32 is exact: the bf16 bits are the top half of the f32."""
    out = bytearray(len(data) * 2)
    out[2::4] = data[0::2]
    out[3::4] = data[1::2]
    return bytes(out)


def f16_to_f32(data):
    n = len(data) // 2
    return struct.pack(f"<{n}f", *struct.unpack(f"<{n}e", data))


def permute_rope_rows(data, rows, row_bytes, n_head):
    """HF Llama stores q/k rows of a head as [first halves..., second halves...]
    (rotate_half); llama.cpp's LLM_ARCH_LLAMA uses rope on interleaved pairs.
    New row (h, i, j) = old row (h, j, i): head h, pair i, element j."""
    if rows % n_head:
        die(f"rope permutation: {rows} rows do not split into {n_head} heads")
    hd = rows // n_head
    half = hd // 2
    out = bytearray(len(data))
    dst = 0
    for h in range(n_head):
        for i in range(half):
            for j in range(2):
                src = (h * hd + j * half + i) * row_bytes
                out[dst:dst + row_bytes] = data[src:src + row_bytes]
                dst += row_bytes
    return bytes(out)


# ---------------------------------------------------------------- gguf writer

class GGUFWriter:
    def __init__(self):
        self.kv = []       # (key, type, payload bytes)
        self.tensors = []  # (name, dims innermost first, ggml type, producer, nbytes)

    @staticmethod
    def _str(s):
        b = s.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def add(self, key, vtype, value):
        if vtype == T_STRING:
            payload = self._str(value)
        elif vtype == T_ARRAY:
            etype, items = value
            parts = [struct.pack("<IQ", etype, len(items))]
            if etype == T_STRING:
                parts.extend(self._str(s) for s in items)
            elif etype == T_INT32:
                parts.append(struct.pack(f"<{len(items)}i", *items))
            elif etype == T_FLOAT32:
                parts.append(struct.pack(f"<{len(items)}f", *items))
            else:
                raise ValueError(etype)
            payload = b"".join(parts)
        else:
            fmt = {T_UINT8: "<B", T_INT8: "<b", T_UINT16: "<H", T_INT16: "<h", T_UINT32: "<I",
                   T_INT32: "<i", T_FLOAT32: "<f", T_BOOL: "<?", T_UINT64: "<Q", T_INT64: "<q",
                   T_FLOAT64: "<d"}[vtype]
            payload = struct.pack(fmt, value)
        self.kv.append((key, vtype, payload))

    def add_tensor(self, name, dims, gtype, nbytes, producer):
        self.tensors.append((name, dims, gtype, producer, nbytes))

    def write(self, path):
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(GGUF_MAGIC)
            f.write(struct.pack("<IQQ", GGUF_VERSION, len(self.tensors), len(self.kv)))
            for key, vtype, payload in self.kv:
                f.write(self._str(key))
                f.write(struct.pack("<I", vtype))
                f.write(payload)
            offset = 0
            offsets = []
            for name, dims, gtype, _, nbytes in self.tensors:
                f.write(self._str(name))
                f.write(struct.pack("<I", len(dims)))
                f.write(struct.pack(f"<{len(dims)}Q", *dims))
                f.write(struct.pack("<IQ", gtype, offset))
                offsets.append(offset)
                offset += (nbytes + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
            pad = (-f.tell()) % ALIGNMENT
            f.write(b"\0" * pad)
            data_start = f.tell()
            for (name, dims, gtype, producer, nbytes), off in zip(self.tensors, offsets):
                assert f.tell() - data_start == off
                data = producer()
                if len(data) != nbytes:
                    die(f"internal: tensor {name}: {len(data)} bytes, expected {nbytes}")
                f.write(data)
                f.write(b"\0" * ((-nbytes) % ALIGNMENT))
        os.replace(tmp, path)


# ---------------------------------------------------------------- tokenizer

def add_tokenizer(w, model_dir, cfg, n_vocab, pre):
    p = os.path.join(model_dir, "tokenizer.json")
    if not os.path.exists(p):
        die(f"{p} missing")
    with open(p, encoding="utf-8") as f:
        tok = json.load(f)
    model = tok.get("model", {})
    if model.get("type") != "BPE" or model.get("byte_fallback"):
        die("only byte-level BPE tokenizers (no byte fallback) are supported; "
            f"this one is {model.get('type')} byte_fallback={model.get('byte_fallback')}")
    if "ByteLevel" not in json.dumps(tok.get("pre_tokenizer")):
        die("tokenizer.json has no ByteLevel pre-tokenizer: not a GPT-2 style BPE")
    vocab = dict(model["vocab"])
    added = {a["id"]: a for a in tok.get("added_tokens", [])}
    for i, a in added.items():
        vocab[a["content"]] = i
    by_id = {}
    for s, i in vocab.items():
        by_id[i] = s
    if max(by_id) >= n_vocab:
        die(f"tokenizer has id {max(by_id)} but the embedding has only {n_vocab} rows")
    tokens, types = [], []
    for i in range(n_vocab):
        if i in by_id:
            tokens.append(by_id[i])
            if i in added:
                types.append(TOK_CONTROL if added[i].get("special") else TOK_USER_DEFINED)
            else:
                types.append(TOK_NORMAL)
        else:
            tokens.append(f"[PAD{i}]")
            types.append(TOK_UNUSED)
    merges = []
    for m in model.get("merges", []):
        merges.append(m if isinstance(m, str) else " ".join(m))

    tcfg = {}
    tp = os.path.join(model_dir, "tokenizer_config.json")
    if os.path.exists(tp):
        with open(tp, encoding="utf-8") as f:
            tcfg = json.load(f)

    def tok_id(name):
        v = tcfg.get(name)
        if isinstance(v, dict):
            v = v.get("content")
        return vocab.get(v) if isinstance(v, str) else None

    def first(v):
        return v[0] if isinstance(v, list) and v else v

    eos = first(cfg.get("eos_token_id"))
    if eos is None:
        eos = tok_id("eos_token")
    pad = cfg.get("pad_token_id")
    if pad is None:
        pad = tok_id("pad_token")
    bos = first(cfg.get("bos_token_id"))
    if bos is None:
        bos = tok_id("bos_token")
    add_bos = bool(tcfg.get("add_bos_token", False))
    if bos is None:
        # No BOS (Qwen style): llama.cpp still wants an id; Qwen's own GGUFs use
        # <|endoftext|>. add_bos_token=false keeps it out of every prompt.
        bos = vocab.get("<|endoftext|>", pad if pad is not None else eos)
        add_bos = False

    w.add("tokenizer.ggml.model", T_STRING, "gpt2")
    w.add("tokenizer.ggml.pre", T_STRING, pre)
    w.add("tokenizer.ggml.tokens", T_ARRAY, (T_STRING, tokens))
    w.add("tokenizer.ggml.token_type", T_ARRAY, (T_INT32, types))
    w.add("tokenizer.ggml.merges", T_ARRAY, (T_STRING, merges))
    if bos is not None:
        w.add("tokenizer.ggml.bos_token_id", T_UINT32, int(bos))
    if eos is not None:
        w.add("tokenizer.ggml.eos_token_id", T_UINT32, int(eos))
    if pad is not None:
        w.add("tokenizer.ggml.padding_token_id", T_UINT32, int(pad))
    w.add("tokenizer.ggml.add_bos_token", T_BOOL, add_bos)
    w.add("tokenizer.ggml.add_eos_token", T_BOOL, False)
    tmpl = tcfg.get("chat_template")
    if isinstance(tmpl, str):
        w.add("tokenizer.chat_template", T_STRING, tmpl)
    return len(merges)


# ---------------------------------------------------------------- model

def convert(model_dir, out_path, pre, name=None):
    cfg_path = os.path.join(model_dir, "config.json")
    if not os.path.exists(cfg_path):
        die(f"{cfg_path} missing")
    with open(cfg_path) as f:
        cfg = json.load(f)
    archs = cfg.get("architectures") or []
    if not archs or archs[0] not in ARCHS:
        die(f"architecture {archs} not supported (supported: {', '.join(ARCHS)})")
    arch = ARCHS[archs[0]]

    n_embd = cfg["hidden_size"]
    n_layer = cfg["num_hidden_layers"]
    n_head = cfg["num_attention_heads"]
    n_head_kv = cfg.get("num_key_value_heads", n_head)
    head_dim = cfg.get("head_dim") or n_embd // n_head
    rope = cfg.get("rope_parameters") or {}
    theta = rope.get("rope_theta", cfg.get("rope_theta", 10000.0))
    rope_type = rope.get("rope_type") or (cfg.get("rope_scaling") or {}).get("rope_type") or "default"
    if rope_type != "default":
        die(f"rope_type {rope_type!r} is not supported by this converter (only 'default')")
    if cfg.get("attention_bias") or cfg.get("mlp_bias"):
        die("attention/MLP biases are not supported by this converter")

    src = load_tensors(model_dir)
    emb = src.get("model.embed_tokens.weight")
    if emb is None:
        die("model.embed_tokens.weight missing")
    n_vocab = emb.shape[0]

    w = GGUFWriter()
    w.add("general.architecture", T_STRING, arch)
    w.add("general.name", T_STRING, name or os.path.basename(os.path.normpath(model_dir)))
    w.add("general.alignment", T_UINT32, ALIGNMENT)
    ftype = {"BF16": FTYPE_MOSTLY_BF16, "F16": FTYPE_MOSTLY_F16, "F32": FTYPE_ALL_F32}[emb.dtype]
    w.add("general.file_type", T_UINT32, ftype)
    w.add(f"{arch}.vocab_size", T_UINT32, n_vocab)
    w.add(f"{arch}.context_length", T_UINT32, cfg.get("max_position_embeddings", 4096))
    w.add(f"{arch}.embedding_length", T_UINT32, n_embd)
    w.add(f"{arch}.block_count", T_UINT32, n_layer)
    w.add(f"{arch}.feed_forward_length", T_UINT32, cfg["intermediate_size"])
    w.add(f"{arch}.attention.head_count", T_UINT32, n_head)
    w.add(f"{arch}.attention.head_count_kv", T_UINT32, n_head_kv)
    w.add(f"{arch}.attention.key_length", T_UINT32, head_dim)
    w.add(f"{arch}.attention.value_length", T_UINT32, head_dim)
    w.add(f"{arch}.rope.dimension_count", T_UINT32, head_dim)
    w.add(f"{arch}.rope.freq_base", T_FLOAT32, float(theta))
    w.add(f"{arch}.attention.layer_norm_rms_epsilon", T_FLOAT32, float(cfg.get("rms_norm_eps", 1e-6)))
    n_merges = add_tokenizer(w, model_dir, cfg, n_vocab, pre)

    used = set()

    def put(hf_name, gg_name, permute_heads=None, required=True):
        t = src.get(hf_name)
        if t is None:
            if required:
                die(f"tensor {hf_name} missing")
            return
        used.add(hf_name)
        gtype, esize = ST_DTYPES[t.dtype]
        dims = list(reversed(t.shape))  # GGUF lists dims innermost first
        nbytes = t.end - t.begin
        if len(t.shape) == 1 and t.dtype != "F32":
            conv = bf16_to_f32 if t.dtype == "BF16" else f16_to_f32
            w.add_tensor(gg_name, dims, GGML_F32, nbytes * 2, lambda t=t, c=conv: c(t.read()))
            return
        if permute_heads:
            rows, row_bytes = t.shape[0], nbytes // t.shape[0]
            w.add_tensor(gg_name, dims, gtype, nbytes,
                         lambda t=t, r=rows, rb=row_bytes, h=permute_heads:
                         permute_rope_rows(t.read(), r, rb, h))
            return
        w.add_tensor(gg_name, dims, gtype, nbytes, t.read)

    put("model.embed_tokens.weight", "token_embd.weight")
    for i in range(n_layer):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        llama = arch == "llama"
        put(p + "input_layernorm.weight", b + "attn_norm.weight")
        put(p + "self_attn.q_proj.weight", b + "attn_q.weight", n_head if llama else None)
        put(p + "self_attn.k_proj.weight", b + "attn_k.weight", n_head_kv if llama else None)
        put(p + "self_attn.v_proj.weight", b + "attn_v.weight")
        put(p + "self_attn.o_proj.weight", b + "attn_output.weight")
        if arch == "qwen3":
            put(p + "self_attn.q_norm.weight", b + "attn_q_norm.weight")
            put(p + "self_attn.k_norm.weight", b + "attn_k_norm.weight")
        put(p + "post_attention_layernorm.weight", b + "ffn_norm.weight")
        put(p + "mlp.gate_proj.weight", b + "ffn_gate.weight")
        put(p + "mlp.up_proj.weight", b + "ffn_up.weight")
        put(p + "mlp.down_proj.weight", b + "ffn_down.weight")
    put("model.norm.weight", "output_norm.weight")
    if not cfg.get("tie_word_embeddings", False):
        put("lm_head.weight", "output.weight")
    elif "lm_head.weight" in src:
        used.add("lm_head.weight")  # tied: llama.cpp reuses token_embd
    left = sorted(set(src) - used - {k for k in src if k.endswith("rotary_emb.inv_freq")})
    if left:
        die(f"tensors not mapped: {', '.join(left[:8])}{' ...' if len(left) > 8 else ''}")

    w.write(out_path)
    total = os.path.getsize(out_path)
    print(f"wrote {out_path}: arch {arch}, {len(w.tensors)} tensors, {len(w.kv)} metadata keys, "
          f"vocab {n_vocab}, {n_merges} merges, {total / 1e6:.1f} MB")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--pre", default="qwen2",
                    help="tokenizer.ggml.pre: llama.cpp's name for the pre-tokenizer split regex (default qwen2)")
    ap.add_argument("--name", help="general.name (default: the model directory's name)")
    a = ap.parse_args()
    convert(a.model_dir, a.out, a.pre, a.name)


if __name__ == "__main__":
    main()
