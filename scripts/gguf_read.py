"""A pure-Python GGUF reader for the project's scripts (no numpy, no gguf-py): the metadata
and where each tensor's bytes are. Used by scripts/parity/gguf_tensor_sha256.py and
scripts/default-model/torch_compare.py.
"""
import struct
from dataclasses import dataclass

_SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


@dataclass
class TensorInfo:
    name: str
    ne: list      # ggml order: ne[0] is the contiguous dimension
    type: int     # ggml type id
    offset: int   # absolute byte offset of the data in the file


def read_gguf(data):
    """(metadata dict, [TensorInfo]) of a GGUF file's bytes."""
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        s = data[pos:pos + n].decode("utf-8", "replace")
        pos += n
        return s

    def value(t):
        if t in _SCALAR:
            return take(_SCALAR[t])
        if t == 8:
            return string()
        et, n = take("I"), take("Q")
        return [value(et) for _ in range(n)]

    if data[:4] != b"GGUF":
        raise ValueError("not a GGUF file")
    pos = 4
    take("I")  # version
    n_tensors, n_kv = take("Q"), take("Q")
    kv = {}
    for _ in range(n_kv):
        key = string()
        kv[key] = value(take("I"))
    raw = []
    for _ in range(n_tensors):
        name = string()
        ne = [take("Q") for _ in range(take("I"))]
        raw.append((name, ne, take("I"), take("Q")))
    align = kv.get("general.alignment", 32)
    base = (pos + align - 1) // align * align
    return kv, [TensorInfo(name, ne, t, base + off) for name, ne, t, off in raw]
