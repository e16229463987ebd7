#!/usr/bin/env bash
# Installs every Debian package densa needs to build, test and benchmark. Idempotent.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config git curl
      libgtest-dev libgmock-dev libbenchmark-dev
      libcli11-dev nlohmann-json3-dev libcpp-httplib-dev libxxhash-dev
      libucx-dev ucx-utils
      libopenmpi-dev openmpi-bin
      libpcre2-dev libutf8proc-dev
      python3-jinja2 python3-regex
      ruby-mdl
      clang-14 libclang-rt-14-dev)  # clang: the libFuzzer targets (fuzz/run.sh, .ci/sanitize)
# python3-jinja2 / python3-regex are test oracles for /usr/bin/python3 (HF's
# apply_chat_template environment; the Unicode regex engine tokenizer patterns are checked
# against). ruby-mdl (markdownlint) checks the docs' Markdown (scripts/check-docs.sh).
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# Node.js and npm run the end-to-end tests with the official `openai` client (tests/e2e).
# Asked by command, not by package, so an existing Node.js (e.g. nodesource's) is kept.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "densa dependencies: ok"
