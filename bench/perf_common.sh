# Shared by bench/perf_offline.sh and bench/llamacpp/compare.sh (sourced): issue #10's two
# random-weight shapes, the row sizes both run, and the membw reading beside them.

# perf_gen DENSA MODEL_DIR QUICK SHAPE DTYPE FORMAT [GEN_MODEL_ARGS...] -> the checkpoint's path,
# written once with `densa gen-model` (reused when present). SHAPE: dense | moe (QUICK=1: a
# small shape). With `--tokenizer bytes` among the extra arguments the file is named
# SHAPE-QUICK-vocab-DTYPE so it never stands in for one without a vocabulary.
perf_gen() {
  local densa=$1 md=$2 quick=$3 shape=$4 dtype=$5 format=$6
  shift 6
  local ext="" tag="" args=()
  [ "$format" = gguf ] && ext=.gguf
  [[ " $* " == *" --tokenizer bytes "* ]] && tag=vocab-
  local path=$md/$shape-$quick-$tag$dtype$ext
  if [ ! -e "$path" ]; then
    if [ "$quick" = 1 ]; then
      args=(--hidden 256 --layers 2 --heads 4 --kv-heads 2 --vocab 4096 --max-context 8192)
      if [ "$shape" = moe ]; then args+=(--arch mixtral --ffn 384 --experts 8 --top-k 2); else args+=(--arch llama --ffn 768); fi
    elif [ "$shape" = moe ]; then args=(--preset moe-959m-a336m)
    else args=(--preset dense-336m); fi
    echo "== perf: gen-model $shape $dtype $format -> $path" >&2
    "$densa" gen-model "${args[@]}" "$@" --dtype "$dtype" --group-size 32 --format "$format" "$path.tmp" >&2
    mv "$path.tmp" "$path"
  fi
  echo "$path"
}

# perf_sizes QUICK: sets the `densa bench offline` arguments of the issue's rows: D1 (batch-1
# decode), PF (prefill 512), AGG (64 parallel), CTX (decode at 4,096 tokens of context).
perf_sizes() {
  if [ "$1" = 1 ]; then
    D1=(--batch 1 --prompt-len 16 --gen-len 16 --repeats 2)
    PF=(--batch 1 --prompt-len 64 --gen-len 2 --repeats 2)
    AGG=(--batch 8 --prompt-len 32 --gen-len 8 --repeats 1)
    CTX=(--batch 1 --prompt-len 512 --gen-len 8 --repeats 1)
  else
    D1=(--batch 1 --prompt-len 16 --gen-len 128 --repeats 3)
    PF=(--batch 1 --prompt-len 512 --gen-len 2 --repeats 3)
    AGG=(--batch 64 --prompt-len 128 --gen-len 32 --repeats 1)
    CTX=(--batch 1 --prompt-len 4096 --gen-len 32 --repeats 1)
  fi
}

# perf_membw MEMBW_EXE OUT_FILE LABEL: appends one membw_bench run (nothing without the exe).
perf_membw() {
  [ -n "$1" ] && [ -x "$1" ] || return 0
  { echo "## $3 $(date -u +%H:%M:%SZ) load: $(uptime | sed 's/.*load average: //')"
    "$1" --benchmark_min_time=1 2>&1 | grep -E '^(membw|BM_|Benchmark|-)' || true; } >> "$2"
}
