#!/usr/bin/env python3
"""Renders every case of cases.json into expected/<name>.txt (or "ERROR: <message>" when the
template raises). Two engines give the same text:
  --jinja2        Jinja2 set up as transformers sets up chat templates (sandbox, trim_blocks,
                  lstrip_blocks, loopcontrols, tojson = json.dumps(ensure_ascii=False));
  --transformers  transformers' own apply_chat_template (the oracle; run on the GPU machine:
                  it writes to the folder given as the last argument instead of expected/).
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def jinja2_render(c, source):
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(m):
        raise jinja2.exceptions.TemplateError(m)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env.from_string(source).render(messages=c["messages"], tools=c.get("tools"), documents=None,
                                          add_generation_prompt=c["add_generation_prompt"],
                                          bos_token=c["bos_token"], eos_token=c["eos_token"],
                                          **c.get("kwargs", {}))


def transformers_render(c, source):
    import transformers
    kwargs = dict(c.get("kwargs", {}))
    try:
        from tokenizers import Tokenizer
        from transformers import PreTrainedTokenizerFast
        tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_file(
            os.path.join(HERE, "..", "..", "tokenizers", "llama3-tiny", "tokenizer.json")))
        tok.bos_token = c["bos_token"] or None
        tok.eos_token = c["eos_token"]
    except Exception as e:  # noqa: BLE001 (a transformers without the class: its renderer)
        print("tokenizer path unavailable:", e)
        from transformers.utils.chat_template_utils import render_jinja_template
        out, _ = render_jinja_template(conversations=[c["messages"]], tools=c.get("tools"), chat_template=source,
                                       add_generation_prompt=c["add_generation_prompt"],
                                       bos_token=c["bos_token"], eos_token=c["eos_token"], **kwargs)
        return out[0]
    return tok.apply_chat_template(c["messages"], tools=c.get("tools"), tokenize=False, chat_template=source,
                                   add_generation_prompt=c["add_generation_prompt"], **kwargs)


def main():
    engine = transformers_render if "--transformers" in sys.argv else jinja2_render
    out = os.path.join(HERE, "expected")
    if "--transformers" in sys.argv and not sys.argv[-1].startswith("--"):
        out = sys.argv[-1]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(HERE, "cases.json"), encoding="utf-8") as f:
        cases = json.load(f)
    for c in cases:
        with open(os.path.join(HERE, c["template"]), encoding="utf-8") as f:
            source = f.read()
        try:
            text = engine(c, source)
        except Exception as e:  # the template raised: the test expects the same message
            text = "ERROR: " + str(e)
        with open(os.path.join(out, c["name"] + ".txt"), "w", encoding="utf-8") as f:
            f.write(text)
    print("rendered", len(cases), "cases into", out)


main()
