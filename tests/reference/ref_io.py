"""Shared helpers for the PyTorch reference generators in tests/reference/.

Writes what the C++ tests read: a Hugging Face style checkpoint directory (config.json +
model.safetensors, written here without the `safetensors` package) and golden outputs
(golden.json + prompt<i>.logits.f32.bin). Only torch and numpy are needed; run with
/usr/bin/python3 (Debian's python3-torch).

Golden layout (same convention as ../shared/models/*/golden):
  golden.json               {"arch", "prompts": [{"prompt_ids", "greedy_ids", "min_margin",
                             "selected_experts"?}], "num_greedy", "logits_file_layout", ...}
  prompt<i>.logits.f32.bin  float32 LE, C order, [len(prompt_ids) + num_greedy, vocab]: row r is
                            the logits at position r for tokens = prompt_ids + greedy_ids, so
                            argmax(row len(prompt_ids) - 1 + k) == greedy_ids[k].
"""
import json
import os
import struct

import numpy as np
import torch

# The prompts of ../shared/models/*/golden/golden.json, tokenized with ../shared/models/tokenizer
# (ids include the leading <s> = 1), so text prompts through densa's tokenizer give these ids.
PROMPTS = [
    ("Once upon a time, there was a little girl named Lily.",
     [1, 396, 417, 261, 375, 989, 378, 281, 261, 374, 426, 449, 351, 983]),
    ("One day, Tom and his dog went to the park",
     [1, 405, 339, 989, 562, 268, 338, 717, 447, 267, 265, 544]),
    ("Ben saw a big box.\n\nInside the box",
     [1, 609, 418, 261, 409, 877, 983, 13, 13, 999, 973, 481, 265, 877]),
]

_DTYPE_NAMES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.int32: "I32"}


def bf16_round(t):
    """fp32 tensor rounded to the nearest bf16 value (round-to-nearest-even), kept as fp32."""
    return t.to(torch.bfloat16).to(torch.float32)


def _tensor_bytes(t):
    t = t.contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().astype("<i2").tobytes()
    return t.numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes()


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: torch tensor}. Format: u64 LE header length, JSON header, raw data."""
    header = {}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name]
        data = _tensor_bytes(t)
        header[name] = {"dtype": _DTYPE_NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)  # data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """Inverse of write_safetensors (F32 / BF16 / F16 / I32), for self-checks."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        raw = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        begin, end = h["data_offsets"]
        buf = raw[begin:end]
        if h["dtype"] == "BF16":
            t = torch.from_numpy(np.frombuffer(buf, dtype="<i2").copy()).view(torch.bfloat16)
        else:
            np_type = {"F32": "<f4", "F16": "<f2", "I32": "<i4"}[h["dtype"]]
            t = torch.from_numpy(np.frombuffer(buf, dtype=np_type).copy())
        out[name] = t.reshape(h["shape"])
    return out


def write_config(out_dir, config):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")


def greedy_golden(logits_fn, prompt_ids, num_greedy):
    """Greedy decoding by full recomputation (no cache). logits_fn(ids) -> [len(ids), vocab]
    fp32 (and optionally a dict of extras for the last call). Returns (greedy_ids, logits of
    prompt+greedy [len+num_greedy, vocab], min top1-top2 margin over the greedy steps, extras)."""
    ids = list(prompt_ids)
    for _ in range(num_greedy):
        logits, _ = logits_fn(ids)
        ids.append(int(torch.argmax(logits[-1]).item()))  # torch argmax: first max on ties
    logits, extras = logits_fn(ids)
    greedy = ids[len(prompt_ids):]
    margins = []
    for k in range(num_greedy):
        row = logits[len(prompt_ids) - 1 + k]
        top2 = torch.topk(row, 2).values
        margins.append(float(top2[0] - top2[1]))
    return greedy, logits, min(margins), extras


def write_golden(out_dir, arch, records, extra=None):
    """records: list of dicts with prompt_ids, greedy_ids, logits (torch [rows, vocab]),
    min_margin and optional selected_experts. Writes golden.json + prompt<i>.logits.f32.bin."""
    prompts = []
    for i, r in enumerate(records):
        logits = r["logits"].detach().to(torch.float32).contiguous().numpy().astype("<f4")
        logits.tofile(os.path.join(out_dir, "prompt%d.logits.f32.bin" % i))
        entry = {k: v for k, v in r.items() if k != "logits"}
        entry["logits_rows"] = int(logits.shape[0])
        prompts.append(entry)
    golden = {
        "arch": arch,
        "num_greedy": len(records[0]["greedy_ids"]),
        "logits_file_layout": "prompt<i>.logits.f32.bin: float32 LE [len(prompt_ids)+num_greedy, vocab], "
                              "row r = logits at position r of prompt_ids + greedy_ids",
        "prompts": prompts,
    }
    if extra:
        golden.update(extra)
    with open(os.path.join(out_dir, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
