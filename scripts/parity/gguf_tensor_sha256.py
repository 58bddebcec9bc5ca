#!/usr/bin/env python3
"""Prints {"tensor name": "sha256 of its data bytes", ...} for a GGUF file, as JSON.

Pure Python (no numpy, no gguf-py): the LoRA goldens compare tensor bytes by name, since
llama-export-lora orders tensors by name and rewrites general.file_type (Note [LoRA merge]).
"""
import hashlib
import json
import struct
import sys

SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
# ggml type id -> (block size, bytes per block) for the types the goldens use.
BLOCKS = {0: (1, 4), 1: (1, 2), 8: (32, 34), 30: (1, 2)}


def main(path):
    data = open(path, "rb").read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        s = data[pos:pos + n]
        pos += n
        return s.decode("utf-8")

    def skip_value(t):
        nonlocal pos
        if t == 8:
            string()
        elif t == 9:
            et, n = take("I"), take("Q")
            for _ in range(n):
                skip_value(et)
        else:
            pos += SCALAR[t]

    assert data[:4] == b"GGUF", "not a GGUF file"
    pos = 4
    take("I")  # version
    n_tensors, n_kv = take("Q"), take("Q")
    alignment = 32
    for _ in range(n_kv):
        key, t = string(), take("I")
        if key == "general.alignment":
            alignment = take("I")
        else:
            skip_value(t)
    infos = []
    for _ in range(n_tensors):
        name, n_dims = string(), take("I")
        ne = [take("Q") for _ in range(n_dims)]
        gtype, offset = take("I"), take("Q")
        n = 1
        for d in ne:
            n *= d
        bs, bb = BLOCKS[gtype]
        infos.append((name, offset, n // bs * bb))
    base = (pos + alignment - 1) // alignment * alignment
    out = {name: hashlib.sha256(data[base + off:base + off + size]).hexdigest() for name, off, size in infos}
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main(sys.argv[1])
