#!/usr/bin/env python3
"""Fails when a file in src/ is over 600 lines or a function in it is over 120, unless the
README.md of the file's folder lists it with its reason under a "## Size exceptions" heading.

An exception is a bullet that starts with the file's name in backticks, and for a function
also the function's name in backticks:
    - `attention_amx.cpp`: why the file is one piece
    - `matmul.cpp` `matmul_many_with_isa`: why the function is one piece
An exception that no longer applies (the file or function is back under the limit, or gone)
is reported too, so the list stays true.

Functions are found with a brace scan over the source with comments and literals blanked: a
`{` at namespace or class scope whose preceding statement has a parameter list opens one, and
its length runs from the line of its name to the line of its closing `}`. Lambdas and local
classes count toward the function around them.

Usage: scripts/check-sizes.py [ROOT] [--list]   (--list: print every file and function over
the limits, listed or not)
"""
import os
import re
import sys

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 120

EXCEPTION_HEADING = re.compile(r"^##\s+Size exceptions\s*$", re.M)
BULLET = re.compile(r"^\s*[-*]\s+`([^`]+)`(?:\s+`([^`]+)`)?")
NAME = re.compile(r"(~?[A-Za-z_][A-Za-z_0-9]*(?:::~?[A-Za-z_][A-Za-z_0-9]*)*(?:\s*operator\s*[^\s(]+)?)\s*(?:<[^()]*>)?\s*\($")


def blank(text):
    """The source with comments, string and character literals replaced by spaces; newlines kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]{0,16})\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = ")" + m.group(1) + '"'
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator 1'000
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(text):
    """(name, first line, last line) of every function body at namespace or class scope."""
    src = blank(text)
    found = []
    stack = []  # kinds of the open braces: "ns", "class", "fn", "other"
    stmt_start = 0  # offset just after the last ; { or } at the current level
    fn_open = None  # (name, line) of the function whose body is open at the outermost fn level
    for i, c in enumerate(src):
        if c == ";":
            if not stack or stack[-1] in ("ns", "class"):
                stmt_start = i + 1
        elif c == "{":
            kind = "other"
            if not stack or stack[-1] in ("ns", "class"):
                head = src[stmt_start:i]
                flat = " ".join(head.split())
                if re.search(r"\bnamespace\b", flat) or re.match(r'^extern\s*$', flat.strip()):
                    kind = "ns"
                elif re.search(r"\b(class|struct|union|enum)\b", flat) and "(" not in flat.split("=")[0]:
                    kind = "class"
                elif ")" in flat and not flat.rstrip().endswith("="):
                    # The name is the identifier before the first "(" at top nesting.
                    depth, cut = 0, -1
                    for k, ch in enumerate(flat):
                        if ch == "(":
                            if depth == 0:
                                cut = k
                                break
                            depth += 1
                    m = NAME.search(flat[:cut + 1]) if cut >= 0 else None
                    if m and m.group(1).split("::")[-1] not in ("if", "for", "while", "switch", "return"):
                        kind = "fn"
                        line = src.count("\n", 0, stmt_start + (len(head) - len(head.lstrip()))) + 1
                        fn_open = (m.group(1).strip(), line)
            stack.append(kind)
            stmt_start = i + 1
        elif c == "}":
            kind = stack.pop() if stack else "other"
            if kind == "fn" and fn_open is not None:
                found.append((fn_open[0], fn_open[1], src.count("\n", 0, i) + 1))
                fn_open = None
            if not stack or stack[-1] in ("ns", "class"):
                stmt_start = i + 1
    return found


def exceptions(readme):
    """{(file, function or None): line} listed under the README's "## Size exceptions"."""
    if not os.path.exists(readme):
        return {}
    text = open(readme, encoding="utf-8").read()
    m = EXCEPTION_HEADING.search(text)
    if not m:
        return {}
    section = text[m.end():]
    nxt = re.search(r"^##?\s", section, re.M)
    section = section[:nxt.start()] if nxt else section
    out = {}
    for line in section.splitlines():
        b = BULLET.match(line)
        if b:
            out[(b.group(1), b.group(2))] = line.strip()
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    list_all = "--list" in sys.argv
    root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), ".."))
    src_root = os.path.join(root, "src")
    problems, listed, over = [], {}, []
    for folder, _, names in sorted(os.walk(src_root)):
        allowed = exceptions(os.path.join(folder, "README.md"))
        for key in allowed:
            listed[(folder, key)] = False
        for name in sorted(names):
            if not name.endswith((".cpp", ".h")):
                continue
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            text = open(path, encoding="utf-8").read()
            lines = text.count("\n") + (0 if text.endswith("\n") else 1)
            if lines > MAX_FILE_LINES:
                over.append(f"{rel}: {lines} lines")
                if (name, None) in allowed:
                    listed[(folder, (name, None))] = True
                else:
                    problems.append(f"{rel}: {lines} lines (limit {MAX_FILE_LINES}); split it or list it under "
                                    f"'## Size exceptions' in {os.path.relpath(folder, root)}/README.md")
            for fn, first, last in functions(text):
                length = last - first + 1
                if length <= MAX_FUNCTION_LINES:
                    continue
                short = fn.split("::")[-1]
                over.append(f"{rel}:{first}: {fn}: {length} lines")
                key = next((k for k in ((name, fn), (name, short)) if k in allowed), None)
                if key:
                    listed[(folder, key)] = True
                else:
                    problems.append(f"{rel}:{first}: function {fn} is {length} lines (limit {MAX_FUNCTION_LINES}); "
                                    f"split it or list it under '## Size exceptions' in "
                                    f"{os.path.relpath(folder, root)}/README.md")
    for (folder, key), used in sorted(listed.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        if not used:
            what = f"{key[0]} {key[1]}" if key[1] else key[0]
            problems.append(f"{os.path.relpath(folder, root)}/README.md: size exception '{what}' is not over the "
                            f"limit (or not there): remove it")
    if list_all:
        print("\n".join(over))
    for p in problems:
        print(p)
    if problems:
        print(f"check-sizes: {len(problems)} problem(s)")
        return 1
    print(f"check-sizes: every file in src/ is within {MAX_FILE_LINES} lines and every function within "
          f"{MAX_FUNCTION_LINES}, or listed with its reason")
    return 0


if __name__ == "__main__":
    sys.exit(main())
