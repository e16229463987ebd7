#!/usr/bin/env python3
"""Fails when a file in src/ includes a header of a layer its own layer does not link.

The layers and their dependencies are read from the densa_layer(...) calls in CMakeLists.txt
(the link order is the layering, docs/ARCHITECTURE.md "Layers"): a layer may include its own
headers and those of every layer it links, directly or through another layer. src/cli (the
executable) may include any layer. Includes are the quoted ones whose first path component is
a layer folder; system headers and test helpers are not checked.

Usage: scripts/check-layers.py [ROOT]   (ROOT: the repository, default: this script's parent)
Prints one line per violation and exits 1 if there is any, else prints a summary, exits 0.
"""
import os
import re
import sys

LAYER_CALL = re.compile(r"^\s*densa_layer\(\s*(\w+)([^)]*)\)", re.M)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
TOP = "cli"  # the executable: sits on every layer


def layer_graph(cmakelists):
    with open(cmakelists, encoding="utf-8") as f:
        text = f.read()
    deps = {}
    for m in LAYER_CALL.finditer(text):
        name = m.group(1)
        deps[name] = [d[len("densa_"):] for d in m.group(2).split() if d.startswith("densa_")]
    if not deps:
        raise SystemExit(f"check-layers: no densa_layer() calls in {cmakelists}")
    for name, ds in deps.items():
        for d in ds:
            if d not in deps:
                raise SystemExit(f"check-layers: layer {name} links densa_{d}, which is no layer")
    return deps


def closure(deps):
    allowed = {}
    def visit(name, stack=()):
        if name in allowed:
            return allowed[name]
        if name in stack:
            raise SystemExit(f"check-layers: the layers link in a cycle: {' -> '.join(stack + (name,))}")
        out = {name}
        for d in deps[name]:
            out |= visit(d, stack + (name,))
        allowed[name] = out
        return out
    for name in deps:
        visit(name)
    return allowed


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    deps = layer_graph(os.path.join(root, "CMakeLists.txt"))
    allowed = closure(deps)
    layers = set(deps)
    src = os.path.join(root, "src")
    problems = []
    files = 0
    for folder in sorted(os.listdir(src)):
        if not os.path.isdir(os.path.join(src, folder)):
            continue
        if folder not in layers and folder != TOP:
            problems.append(f"src/{folder}/: a folder that is no layer (add a densa_layer() call)")
            continue
        for dirpath, _, names in os.walk(os.path.join(src, folder)):
            for n in sorted(names):
                if not n.endswith((".h", ".cpp", ".inc")):
                    continue
                path = os.path.join(dirpath, n)
                rel = os.path.relpath(path, root)
                files += 1
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for m in INCLUDE.finditer(text):
                    target = m.group(1).split("/")[0]
                    if "/" not in m.group(1) or target not in layers or folder == TOP:
                        continue
                    if target not in allowed[folder]:
                        line = text.count("\n", 0, m.start()) + 1
                        ok = ", ".join(sorted(allowed[folder]))
                        problems.append(f"{rel}:{line}: includes \"{m.group(1)}\": layer {folder} links only {ok}")
    for p in problems:
        print(p)
    if problems:
        print(f"check-layers: {len(problems)} include(s) against the layer order (CMakeLists.txt densa_layer)")
        return 1
    print(f"check-layers: {files} files in {len(layers) + 1} layers, every include follows the layer order")
    return 0


if __name__ == "__main__":
    sys.exit(main())
