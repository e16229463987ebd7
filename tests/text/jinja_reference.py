#!/usr/bin/python3
# Reference renderer for densa's Jinja tests: Python Jinja2 in the environment Hugging Face's
# apply_chat_template builds (transformers' _compile_jinja_template): a sandbox with
# trim_blocks / lstrip_blocks and loopcontrols, tojson with ensure_ascii=False, raise_exception
# and strftime_now. Input (stdin): JSON list of {"template": str, "vars": obj, "now": int?}.
# Output (stdout): JSON list of {"ok": true, "output": str} or {"ok": false, "error": str}.
import json, sys
from datetime import datetime
import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

def make_env(now):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)
    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
    def strftime_now(fmt):
        return (datetime.fromtimestamp(now) if now is not None else datetime.now()).strftime(fmt)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env

envs, compiled = {}, {}  # the corpus renders each template many times: compile once per clock

def render(case):
    now = case.get("now")
    try:
        key = (now, case["template"])
        if key not in compiled:
            env = envs.setdefault(now, make_env(now))
            compiled[key] = env.from_string(case["template"])
        return {"ok": True, "output": compiled[key].render(**case["vars"])}
    except Exception as e:  # any Jinja2 / Python error: densa must fail too
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}

json.dump([render(c) for c in json.load(sys.stdin)], sys.stdout, ensure_ascii=False)
