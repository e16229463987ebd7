#!/usr/bin/python3
"""Writes ggml_reference.gguf: blocks quantized by llama.cpp's own ggml and the fp32 values
ggml's own dequantizers give for them, the oracle for tests/quant/ggml_blocks_test.cpp.

Usage: make_reference.py LIBGGML_BASE_SO OUT.gguf
  LIBGGML_BASE_SO: libggml-base.so of node-llama-cpp's prebuilt llama.cpp (npm
  @node-llama-cpp/linux-x64, bins/linux-x64/), e.g. after `npm ci` in a copy of bench/llamacpp.

For each type T (ggml ids below) the file holds, all [4 rows, 512 columns] (GGUF ne = [512, 4]):
  T.quant        the input `source` quantized by ggml_quantize_chunk (no importance matrix)
  T.quant.imat   the same with an importance matrix (ggml's other quantizer path)
  T.random       random bytes with every f16 field set to a random finite half
  T.*.ggml       F32: ggml's dequantize_row_T of the tensor above
and `source` (F32). Deterministic: a fixed-seed generator, no system randomness.
"""
import ctypes
import random
import struct
import sys

TYPES = [  # id, name, block elems, block bytes, byte offsets of f16 fields in a block
    (3, "q4_1", 32, 20, [0, 2]),
    (6, "q5_0", 32, 22, [0]),
    (7, "q5_1", 32, 24, [0, 2]),
    (10, "q2_K", 256, 84, [80, 82]),
    (11, "q3_K", 256, 110, [108]),
    (12, "q4_K", 256, 144, [0, 2]),
    (13, "q5_K", 256, 176, [0, 2]),
    (14, "q6_K", 256, 210, [208]),
    (20, "iq4_nl", 32, 18, [0]),
    (23, "iq4_xs", 256, 136, [0]),
    (39, "mxfp4", 32, 17, []),
]
ROWS, COLS = 4, 512


def source_values(rng):
    v = []
    for r in range(ROWS):
        for c in range(COLS):
            if r == 0:
                x = rng.gauss(0.0, 0.02)
            elif r == 1:
                x = rng.gauss(0.0, 1.0) * (8.0 if rng.random() < 0.02 else 1.0)
            elif r == 2:
                x = rng.uniform(0.0, 3.0)  # all positive: K-quant mins at zero
            else:
                x = 0.0 if c < 256 else rng.gauss(0.0, 1e-3) - 2e-3  # a zero super-block, then negatives
            v.append(x)
    return struct.unpack(f"<{len(v)}f", struct.pack(f"<{len(v)}f", *v))  # rounded to f32


def random_blocks(rng, nblocks, bbytes, f16_offsets):
    out = bytearray(rng.getrandbits(8) for _ in range(nblocks * bbytes))
    for b in range(nblocks):
        for off in f16_offsets:
            h = (rng.getrandbits(1) << 15) | (rng.randrange(0, 31) << 10) | rng.getrandbits(10)
            struct.pack_into("<H", out, b * bbytes + off, h)
    return bytes(out)


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def write_gguf(path, tensors, description):
    align = 32
    kv = gguf_string("general.description") + struct.pack("<I", 8) + gguf_string(description)
    header = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), 1) + kv
    infos, data = b"", b""
    for name, gtype, ne, payload in tensors:
        data += b"\0" * ((-len(data)) % align)
        infos += gguf_string(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        infos += struct.pack("<IQ", gtype, len(data))
        data += payload
    head = header + infos
    head += b"\0" * ((-len(head)) % align)
    with open(path, "wb") as f:
        f.write(head + data)


def main():
    lib = ctypes.CDLL(sys.argv[1])
    lib.ggml_quantize_chunk.restype = ctypes.c_size_t
    lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                        ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    lib.ggml_quantize_init.argtypes = [ctypes.c_int]
    rng = random.Random(20261202)
    src = source_values(rng)
    src_buf = (ctypes.c_float * len(src))(*src)
    imat = (ctypes.c_float * COLS)(*[rng.uniform(0.1, 4.0) for _ in range(COLS)])
    tensors = [("source", 0, [COLS, ROWS], bytes(src_buf))]

    def dequant(name, payload):
        fn = getattr(lib, "dequantize_row_" + name)
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        out = (ctypes.c_float * (ROWS * COLS))()
        buf = ctypes.create_string_buffer(payload, len(payload))
        fn(buf, out, ROWS * COLS)
        return bytes(out)

    for gid, name, belems, bbytes, f16s in TYPES:
        lib.ggml_quantize_init(gid)
        nbytes = ROWS * COLS // belems * bbytes
        for suffix, im in (("quant", None), ("quant.imat", imat)):
            dst = ctypes.create_string_buffer(nbytes)
            n = lib.ggml_quantize_chunk(gid, src_buf, dst, 0, ROWS, COLS, im)
            assert n == nbytes, (name, n, nbytes)
            q = dst.raw
            tensors.append((f"{name}.{suffix}", gid, [COLS, ROWS], q))
            tensors.append((f"{name}.{suffix}.ggml", 0, [COLS, ROWS], dequant(name, q)))
        r = random_blocks(rng, ROWS * COLS // belems, bbytes, f16s)
        tensors.append((f"{name}.random", gid, [COLS, ROWS], r))
        tensors.append((f"{name}.random.ggml", 0, [COLS, ROWS], dequant(name, r)))
    write_gguf(sys.argv[2], tensors, "ggml quantize/dequantize reference, written by "
               "tests/data/ggml_quants/make_reference.py with " + sys.argv[1].split("/node_modules/")[-1])


if __name__ == "__main__":
    main()
