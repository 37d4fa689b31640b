#!/usr/bin/env python3
"""Encodes a list of strings with the Rust `tokenizers` library on each hand-made fixture and
writes oracle.json ({fixture: [{text, ids, decoded}]}) beside this file (or to argv[1]);
tests/text/test_tokenizer_families.cpp (TokenizerOracle.Agrees) checks ninfer against it.
Needs `pip install tokenizers` (0.23 was used)."""
import json
import os
import sys

from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
TEXTS = {
    "gemma2-tiny": ["Hello world", " Hello", "Hello  world", "   ", "Hello\u20ac", "Hellozz",
                    "<start_of_turn>user\nHello<end_of_turn>\n", ""],
    "phi3-tiny": ["Hello world", "<|user|>\nHello<|end|>\n<|assistant|>\n", "Hello\nz", "\u00e9\u00e9",
                  "  Hello", "Hello</s> world"],
    "llama3-tiny": ["20242024", "the cat", "he's", "he<|eot_id|>", "IT'S  \n\n the", "\u00e9 cat"],
    "qwen2-nfc-tiny": ["e\u0301", "cafe\u0301", "\u1112\u1161\u11ab", "\u212b", "caf\u00e9", "\ud55c", "hello",
                       "\ufb01", "\U0001f44d\U0001f3fd", "<|im_start|>e\u0301<|im_end|>", "a\u0301\u0323 x"],
}
TEXTS["gemma3-tiny"] = TEXTS["gemma2-tiny"]

out = {}
for name, texts in TEXTS.items():
    tok = Tokenizer.from_file(os.path.join(HERE, name, "tokenizer.json"))
    cases = []
    for t in texts:
        ids = tok.encode(t, add_special_tokens=True).ids
        cases.append({"text": t, "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)})
    out[name] = cases
dst = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "oracle.json")
with open(dst, "w", encoding="utf-8") as f:
    json.dump(out, f, ensure_ascii=False, indent=1)
    f.write("\n")
print("wrote", dst)
