#!/usr/bin/python3
"""Renders a conversation with a real chat template the way Hugging Face's
apply_chat_template does (jinja2 ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
loopcontrols, tojson with ensure_ascii=False, raise_exception), twice: the conversation
without its last message plus the generation prompt, and the whole conversation. The test
takes the text the second adds to the first as the assistant turn a model would generate.

Input (stdin, JSON): {"template": path, "messages": [...], "tools": [...] or null,
                      "kwargs": {extra template variables}}
Output (stdout, JSON): {"prompt": str, "full": str}
Needs /usr/bin/python3 with Debian's python3-jinja2.
"""
import json
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def main():
    req = json.load(sys.stdin)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    with open(req["template"], encoding="utf-8") as f:
        template = env.from_string(f.read())
    kwargs = dict(req.get("kwargs") or {})
    tools = req.get("tools")
    messages = req["messages"]
    prompt = template.render(messages=messages[:-1], tools=tools, add_generation_prompt=True,
                             **kwargs)
    full = template.render(messages=messages, tools=tools, add_generation_prompt=False,
                           **kwargs)
    json.dump({"prompt": prompt, "full": full}, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
