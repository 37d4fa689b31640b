#!/usr/bin/env python3
"""Writes cases.json: one conversation per real chat template in this folder (system, user,
assistant, and a tool call plus its result where the template supports tools), with the
template kwargs and special tokens of that model. render.py renders them into expected/."""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city name."},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}]
SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
USER = {"role": "user", "content": "What is the weather in Paris?"}
CALL = {"role": "assistant", "content": "", "tool_calls": [{"id": "call12345", "type": "function", "function": {
    "name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]}
RESULT = {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": "{\"temperature\": 21}"}
ANSWER = {"role": "assistant", "content": "It is 21 \u00b0C in Paris."}
USER2 = {"role": "user", "content": "Thanks! And tomorrow?"}
PLAIN = [SYSTEM, USER, ANSWER, USER2]
TOOL_CHAT = [SYSTEM, USER, CALL, RESULT, ANSWER, USER2]

LLAMA = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
MISTRAL = {"bos_token": "<s>", "eos_token": "</s>"}
cases = [
    dict(name="llama-3.1-tools", template="llama-3.1-8b-instruct.jinja", messages=TOOL_CHAT, tools=TOOLS, **LLAMA),
    dict(name="llama-3.1-plain", template="llama-3.1-8b-instruct.jinja", messages=PLAIN, **LLAMA),
    dict(name="llama-3.1-tools-in-system", template="llama-3.1-8b-instruct.jinja", messages=TOOL_CHAT, tools=TOOLS,
         kwargs={"tools_in_user_message": False, "date_string": "01 Dec 2026"}, **LLAMA),
    dict(name="qwen3-tools-no-thinking", template="qwen3.jinja",
         messages=[SYSTEM, USER, dict(CALL, reasoning_content="I should call the tool."), RESULT], tools=TOOLS,
         kwargs={"enable_thinking": False}, bos_token="", eos_token="<|im_end|>"),
    dict(name="qwen3-thinking-history", template="qwen3.jinja",
         messages=[USER, {"role": "assistant", "content": "<think>\nParis is in France.\n</think>\n\nParis."},
                   {"role": "user", "content": "And Rome?"},
                   {"role": "assistant", "content": "Italy.", "reasoning_content": "Rome is in Italy."}],
         add_generation_prompt=False, bos_token="", eos_token="<|im_end|>"),
    dict(name="qwen3-plain-thinking", template="qwen3.jinja", messages=PLAIN, kwargs={"enable_thinking": True},
         bos_token="", eos_token="<|im_end|>"),
    dict(name="mistral-v0.3-tools", template="mistral-7b-instruct-v0.3.jinja", messages=TOOL_CHAT, tools=TOOLS, **MISTRAL),
    dict(name="mistral-v0.3-plain", template="mistral-7b-instruct-v0.3.jinja", messages=PLAIN, **MISTRAL),
    dict(name="mistral-nemo-tools", template="mistral-nemo-instruct-2407.jinja", messages=TOOL_CHAT, tools=TOOLS,
         **MISTRAL),
    dict(name="gemma-2", template="gemma-2-it.jinja", messages=[USER, ANSWER, USER2], bos_token="<bos>",
         eos_token="<eos>"),
    dict(name="gemma-3", template="gemma-3-it.jinja", messages=PLAIN, bos_token="<bos>", eos_token="<eos>"),
    dict(name="phi-3.5-mini", template="phi-3.5-mini-instruct.jinja", messages=PLAIN, bos_token="<s>",
         eos_token="<|endoftext|>"),
    dict(name="phi-3.5-mini-no-prompt", template="phi-3.5-mini-instruct.jinja", messages=PLAIN[:3],
         add_generation_prompt=False, bos_token="<s>", eos_token="<|endoftext|>"),
    dict(name="phi-4", template="phi-4.jinja", messages=PLAIN, bos_token="<|endoftext|>", eos_token="<|im_end|>"),
    dict(name="phi-4-mini-tools", template="phi-4-mini-instruct.jinja",
         messages=[dict(SYSTEM, tools=json.dumps([t["function"] for t in TOOLS])), USER, ANSWER, USER2],
         bos_token="<|endoftext|>", eos_token="<|endoftext|>"),
    dict(name="granite-3.3-tools", template="granite-3.3-instruct.jinja", messages=TOOL_CHAT, tools=TOOLS,
         bos_token="<|end_of_text|>", eos_token="<|end_of_text|>"),
    dict(name="qwen3-coder-tools", template="qwen3-coder.jinja", messages=TOOL_CHAT,
         tools=[dict(TOOLS[0], function=dict(TOOLS[0]["function"], strict=True))], bos_token="",
         eos_token="<|im_end|>"),
    dict(name="qwen3-coder-no-system", template="qwen3-coder.jinja", messages=TOOL_CHAT[1:], tools=TOOLS,
         bos_token="", eos_token="<|im_end|>"),
    dict(name="olmo-2", template="olmo-2-instruct.jinja", messages=PLAIN, bos_token="<|endoftext|>",
         eos_token="<|endoftext|>"),
]
for c in cases:
    c.setdefault("add_generation_prompt", True)
with open(os.path.join(HERE, "cases.json"), "w", encoding="utf-8") as f:
    json.dump(cases, f, ensure_ascii=False, indent=1)
    f.write("\n")
print(len(cases), "cases")
