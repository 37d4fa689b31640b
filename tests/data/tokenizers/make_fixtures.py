#!/usr/bin/env python3
"""Writes the hand-made tokenizer fixtures gemma2-tiny, gemma3-tiny, phi3-tiny, llama3-tiny and
qwen2-nfc-tiny: the pipeline layout (normalizer, pre_tokenizer, decoder, post_processor, model
flags, added tokens) of the real model's tokenizer.json, with a vocabulary of a few dozen tokens
so that the expected ids in tests/text/test_tokenizer_families.cpp can be worked out by hand.
Run from anywhere: python3 tests/data/tokenizers/make_fixtures.py (deterministic output)."""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
SP = "\u2581"  # the SentencePiece space marker


def added(id_, content, special=True, rstrip=False):
    return {"id": id_, "content": content, "single_word": False, "lstrip": False, "rstrip": rstrip,
            "normalized": False, "special": special}


def bpe(vocab, merges, unk, byte_fallback, fuse_unk, ignore_merges=False):
    return {"type": "BPE", "dropout": None, "unk_token": unk, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": fuse_unk, "byte_fallback": byte_fallback,
            "ignore_merges": ignore_merges, "vocab": {t: i for i, t in enumerate(vocab)},
            "merges": [list(m) for m in merges]}


def template(bos):
    return {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos: {"id": bos, "ids": [BOS_IDS[bos]], "tokens": [bos]}}}


BOS_IDS = {"<bos>": 2, "<s>": 1, "<|begin_of_text|>": 260}


def write(name, tok, config):
    d = os.path.join(HERE, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=1)
        f.write("\n")


# ---- Gemma 2 / Gemma 3: SentencePiece BPE, spaces -> ▁ with no prefix, <bos> from the
# post-processor, byte fallback, fused <unk>; decoder Replace + ByteFallback + Fuse (no Strip).
GEMMA_VOCAB = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>",
               "<0xE2>", "<0x82>", "<0xAC>", SP, "H", "e", "l", "o", "w", "r", "d", "\n",
               "ll", "He", "Hell", "Hello", SP + "w", "or", SP + "wor", "ld", SP + "world", SP + SP,
               "u", "s"]
GEMMA_MERGES = [("l", "l"), ("H", "e"), ("He", "ll"), ("Hell", "o"), (SP, "w"), ("o", "r"),
                (SP + "w", "or"), ("l", "d"), (SP + "wor", "ld"), (SP, SP)]


def gemma(pre_tokenizer):
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [added(0, "<pad>"), added(1, "<eos>"), added(2, "<bos>"), added(3, "<unk>"),
                             added(4, "<start_of_turn>"), added(5, "<end_of_turn>")],
            "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": SP},
            "pre_tokenizer": pre_tokenizer,
            "post_processor": template("<bos>"),
            "decoder": {"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": SP}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"}]},
            "model": bpe(GEMMA_VOCAB, GEMMA_MERGES, "<unk>", True, True)}


GEMMA_CONFIG = {"add_bos_token": True, "add_eos_token": False, "bos_token": "<bos>", "eos_token": "<eos>",
                "pad_token": "<pad>", "unk_token": "<unk>"}
write("gemma2-tiny", gemma(None), GEMMA_CONFIG)
write("gemma3-tiny", gemma({"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                            "invert": False}), GEMMA_CONFIG)

# ---- Phi-3: the Llama-2 SentencePiece layout (Prepend ▁ + Replace, Strip in the decoder) with
# Phi-3's chat markers as special added tokens that swallow the whitespace after them (rstrip).
PHI3_VOCAB = ["<unk>", "<s>", "</s>", "<0x0A>", "<0x7A>", SP, "H", "e", "l", "o", "w", "r", "d",
              "ll", "He", "Hell", "Hello", SP + "Hello", SP + "w", "or", SP + "wor", "ld", SP + "world"]
PHI3_MERGES = [("l", "l"), ("H", "e"), ("He", "ll"), ("Hell", "o"), (SP, "Hello"), (SP, "w"), ("o", "r"),
               (SP + "w", "or"), ("l", "d"), (SP + "wor", "ld")]
phi3 = {"version": "1.0", "truncation": None, "padding": None,
        # NOTE: real Phi-3 numbers these 32000, 32001, 32006, 32007, 32010 (right after its
        # 32000-token vocabulary); here they follow this vocabulary's 23 tokens in the same
        # order. The `tokenizers` library ignores an added token's "id" when the model
        # vocabulary lacks the token and numbers it after the vocabulary, so only contiguous
        # ids mean the same to it and to ninfer.
        "added_tokens": [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>", rstrip=True),
                         added(23, "<|endoftext|>"), added(24, "<|assistant|>", rstrip=True),
                         added(25, "<|system|>", rstrip=True), added(26, "<|end|>", rstrip=True),
                         added(27, "<|user|>", rstrip=True)],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": SP},
            {"type": "Replace", "pattern": {"String": " "}, "content": SP}]},
        "pre_tokenizer": None,
        "post_processor": template("<s>"),
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": SP}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": bpe(PHI3_VOCAB, PHI3_MERGES, "<unk>", True, False)}
write("phi3-tiny", phi3, {"add_bos_token": False, "add_eos_token": False, "bos_token": "<s>",
                          "eos_token": "<|endoftext|>", "unk_token": "<unk>"})

# ---- Llama 3: tiktoken-style byte-level BPE: the Llama-3 Split regex, ByteLevel without its own
# regex, ignore_merges, <|begin_of_text|> from a Sequence[ByteLevel, TemplateProcessing].
BYTES = [chr(c) for c in range(256)]


def byte_chars():
    # GPT-2's byte -> printable character table, in byte order.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs))
    return [chr(table[b]) for b in range(256)]


BC = byte_chars()
LLAMA3_REGEX = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
                "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
# ids 0..255: the byte characters (id = byte value); 256 "20", 257 "202", 258 "Ġcat" (in the
# vocabulary, but no merge leads to it), 259 "he".
LLAMA3_VOCAB = BC + ["20", "202", BC[0x20] + "cat", "he"]
LLAMA3_MERGES = [("2", "0"), ("20", "2"), ("h", "e")]
llama3 = {"version": "1.0", "truncation": None, "padding": None,
          "added_tokens": [added(260, "<|begin_of_text|>"), added(261, "<|end_of_text|>"),
                           added(262, "<|eot_id|>")],
          "normalizer": None,
          "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
              {"type": "Split", "pattern": {"Regex": LLAMA3_REGEX}, "behavior": "Isolated", "invert": False},
              {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
          "post_processor": {"type": "Sequence", "processors": [
              {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
              template("<|begin_of_text|>")]},
          "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
          "model": bpe(LLAMA3_VOCAB, LLAMA3_MERGES, None, False, False, ignore_merges=True)}
write("llama3-tiny", llama3, {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"})

# ---- Qwen2 / Qwen2.5 / Qwen3: byte-level BPE behind an NFC normalizer.
QWEN_REGEX = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
              "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
# ids 0..255 the byte characters; 256 "Ã©" (é = C3 A9 merged), 257 "íķľ" (한 = ED 95 9C).
QWEN_VOCAB = BC + [BC[0xC3] + BC[0xA9], BC[0xED] + BC[0x95] + BC[0x9C], BC[0xED] + BC[0x95]]
QWEN_MERGES = [(BC[0xC3], BC[0xA9]), (BC[0xED], BC[0x95]), (BC[0xED] + BC[0x95], BC[0x9C])]
qwen = {"version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(259, "<|endoftext|>"), added(260, "<|im_start|>"), added(261, "<|im_end|>")],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN_REGEX}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": bpe(QWEN_VOCAB, QWEN_MERGES, None, False, False)}
write("qwen2-nfc-tiny", qwen, {"bos_token": None, "eos_token": "<|im_end|>"})
