#!/usr/bin/env bash
# Checks the documentation; exits non-zero naming every problem it finds.
#   (a) no work-log references ("Session 12", "session 9-14", "sessions 3") in src/, tests/,
#       bench/ scripts, scripts/, README.md or docs/ (docs/history.md, the dated change list,
#       is the one exception), and no links to the removed docs/benchmarks.md or docs/img/;
#   (b) every file under docs/figures/ (and docs/img/, if it comes back) is referenced by a
#       Markdown page;
#   (c) every relative link in a tracked Markdown file (README.md, docs/, src/, tests/, bench/;
#       not bench/results/, which holds raw logs) resolves to a file or folder, and every
#       #anchor to a heading of its target;
#   (d) markdownlint (`mdl`, Debian's ruby-mdl, installed by scripts/install-deps.sh) on
#       README.md and docs/ with the rules in scripts/mdl-style.rb. Without mdl the check fails,
#       unless DENSA_DOCS_NO_MDL=1 says to run (a)-(c) alone;
#   (e) docs/usage.md's --help section matches the binary (scripts/gen-usage.sh --check;
#       DENSA_BINARY, default build/densa, which scripts/test.sh builds).
# Usage: scripts/check-docs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
status=0

/usr/bin/env python3 - <<'EOF' || status=1
import os, re, subprocess, sys

files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                       capture_output=True, text=True, check=True).stdout.split()
files = [f for f in files if os.path.exists(f)]
problems = []

# (a) work-log references
session = re.compile(r"\bsessions?\s+[0-9]+\b", re.IGNORECASE)
dead = re.compile(r"docs/benchmarks\.md|docs/img/")
def scanned(f):
    if f == "docs/history.md" or f.startswith("bench/results/") or "node_modules/" in f:
        return False
    if f == "README.md" or f.startswith(("docs/", "src/", "tests/", "scripts/")):
        return True
    return f.startswith("bench/") and not f.startswith("bench/llamacpp/package")
for f in files:
    if not scanned(f) or f == "scripts/check-docs.sh":
        continue
    try:
        text = open(f, encoding="utf-8").read()
    except (UnicodeDecodeError, IsADirectoryError):
        continue
    for n, line in enumerate(text.splitlines(), 1):
        if session.search(line):
            problems.append(f"{f}:{n}: work-log reference: {line.strip()[:100]}")
        if dead.search(line):
            problems.append(f"{f}:{n}: link to a removed path: {line.strip()[:100]}")

# Markdown links: [text](target) and ![alt](target), outside code.
md_files = sorted(f for f in files if f.endswith(".md") and not f.startswith("bench/results/")
                  and "node_modules/" not in f)
link = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")

def strip_code(text):
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    return re.sub(r"`[^`\n]*`", "", text)

def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")

anchors_cache = {}
def anchors(path):
    if path not in anchors_cache:
        text = open(path, encoding="utf-8").read()
        text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
        seen, out = {}, set()
        for m in re.finditer(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, flags=re.MULTILINE):
            base = slug(re.sub(r"`", "", m.group(1)))
            k = seen.get(base, 0)
            out.add(base if k == 0 else f"{base}-{k}")
            seen[base] = k + 1
        anchors_cache[path] = out
    return anchors_cache[path]

referenced = set()
for f in md_files:
    text = strip_code(open(f, encoding="utf-8").read())
    for m in link.finditer(text):
        target = m.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
        if not os.path.exists(resolved):
            problems.append(f"{f}: link to a missing file: {target}")
            continue
        referenced.add(resolved)
        if anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
            problems.append(f"{f}: link to a missing heading: {target}")

# (b) every figure is referenced
for f in files:
    if f.startswith(("docs/figures/", "docs/img/")) and f not in referenced:
        problems.append(f"{f}: not referenced by any Markdown page")

for p in problems:
    print("check-docs: " + p)
print(f"check-docs: {len(md_files)} Markdown files, {len(referenced)} link targets, "
      f"{len(problems)} problem(s)")
sys.exit(1 if problems else 0)
EOF

# (d) markdownlint
if command -v mdl >/dev/null 2>&1; then
  mapfile -t pages < <(git ls-files --cached --others --exclude-standard README.md 'docs/*.md' 'docs/**/*.md')
  if ! mdl --style scripts/mdl-style.rb "${pages[@]}"; then
    echo "check-docs: markdownlint found problems (rules: scripts/mdl-style.rb)"
    status=1
  fi
elif [ "${DENSA_DOCS_NO_MDL:-0}" = 1 ]; then
  echo "check-docs: mdl not installed; markdownlint skipped (DENSA_DOCS_NO_MDL=1)"
else
  echo "check-docs: mdl (Debian package ruby-mdl) not installed: run scripts/install-deps.sh"
  status=1
fi
# (e) the --help reference in docs/usage.md
if ! scripts/gen-usage.sh --check "${DENSA_BINARY:-build/densa}"; then
  echo "check-docs: docs/usage.md's --help section is stale or could not be checked"
  status=1
fi
[ "$status" = 0 ] && echo "check-docs: ok"
exit "$status"
