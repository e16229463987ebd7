#!/usr/bin/env bash
# BF16 weights: --bf16-activations auto (AMX tiles, x rounded to bf16) against f32 (fp32 x on
# FMAs). Usage: bf16_ab.sh DENSA MODEL OUT ROUNDS [ARGS...]
exec "$(dirname "$0")/../../../../bench/flag_ab.sh" "$1" "$2" "$3" "$4" --bf16-activations auto f32 "${@:5}"
