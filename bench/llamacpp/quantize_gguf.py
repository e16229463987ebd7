#!/usr/bin/python3
"""Quantizes a GGUF with llama.cpp's own llama_model_quantize (what llama-quantize runs), from
node-llama-cpp's prebuilt libllama (npm install in bench/llamacpp first).

Usage: quantize_gguf.py BINS_DIR IN.gguf OUT.gguf FTYPE
  BINS_DIR: node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
  FTYPE: a llama_ftype name below (Q4_K_M, Q6_K, IQ4_XS, ...)
Only the leading fields of llama_model_quantize_params are set (nthread, ftype); the rest keep
llama_model_quantize_default_params()'s values, read back from the library.
"""
import ctypes
import os
import sys

FTYPES = {"Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9, "Q2_K": 10, "Q3_K_S": 11, "Q3_K_M": 12,
          "Q3_K_L": 13, "Q4_K_S": 14, "Q4_K_M": 15, "Q5_K_S": 16, "Q5_K_M": 17, "Q6_K": 18, "IQ4_NL": 25,
          "IQ4_XS": 30, "MXFP4_MOE": 38}


class Params(ctypes.Structure):
    # nthread, ftype, then fields this script leaves as the defaults (kept as opaque bytes).
    _fields_ = [("nthread", ctypes.c_int32), ("ftype", ctypes.c_int32), ("rest", ctypes.c_uint8 * 248)]


def main():
    bins, src, dst, ftype = sys.argv[1:5]
    os.environ.setdefault("LD_LIBRARY_PATH", bins)
    for lib in ("libggml-base.so", "libggml.v0.5.0.so"):
        ctypes.CDLL(os.path.join(bins, lib), mode=ctypes.RTLD_GLOBAL)
    llama = ctypes.CDLL(os.path.join(bins, "libllama.v0.5.0.so"), mode=ctypes.RTLD_GLOBAL)
    llama.llama_backend_init()
    llama.llama_model_quantize_default_params.restype = Params
    p = llama.llama_model_quantize_default_params()
    assert p.nthread == 0 and p.ftype in (7, 9), f"unexpected default ftype {p.ftype}: llama_model_quantize_params changed"
    p.nthread = 2
    p.ftype = FTYPES[ftype]
    llama.llama_model_quantize.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(Params)]
    rc = llama.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p))
    sys.exit(rc)


if __name__ == "__main__":
    main()
