#!/usr/bin/env bash
# INT8 (GGUF Q8_0): --int8-layout tiles against rows. Usage: int8_ab.sh DENSA MODEL OUT ROUNDS [ARGS...]
exec "$(dirname "$0")/../../../../bench/flag_ab.sh" "$1" "$2" "$3" "$4" --int8-layout tiles rows "${@:5}"
