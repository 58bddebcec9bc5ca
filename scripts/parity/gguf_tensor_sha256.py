#!/usr/bin/env python3
"""Prints {"tensor name": "sha256 of its data bytes", ...} for a GGUF file, as JSON.

Pure Python (no numpy, no gguf-py): the LoRA goldens compare tensor bytes by name, since
llama-export-lora orders tensors by name and rewrites general.file_type (Note [LoRA merge]).
"""
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from gguf_read import read_gguf  # noqa: E402

# ggml type id -> (block size, bytes per block) for the types the goldens use.
BLOCKS = {0: (1, 4), 1: (1, 2), 8: (32, 34), 30: (1, 2)}


def main(path):
    data = open(path, "rb").read()
    _, infos = read_gguf(data)
    out = {}
    for t in infos:
        n = 1
        for d in t.ne:
            n *= d
        bs, bb = BLOCKS[t.type]
        out[t.name] = hashlib.sha256(data[t.offset:t.offset + n // bs * bb]).hexdigest()
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main(sys.argv[1])
