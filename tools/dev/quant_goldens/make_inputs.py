#!/usr/bin/env python3
"""Writes the edge-case f32 rows that every quantization golden is made from.

Output: <out>/inputs.f32 = NROWS rows of N little-endian f32 (row-major).
Plain Python (no numpy) so it runs anywhere; seeded, so the file is reproducible.
"""
import math
import random
import struct
import sys

N = 512       # two 256-superblocks, sixteen 32-blocks
NROWS = 12


def rows():
    rng = random.Random(20260502)
    gauss = lambda s: [rng.gauss(0.0, s) for _ in range(N)]
    out = []
    out.append([0.0] * N)                                     # 0 all zeros
    out.append([0.5] * N)                                     # 1 positive constant
    out.append(gauss(1e30))                                   # 2 huge magnitudes (f16 scales overflow)
    out.append(gauss(1e-30))                                  # 3 tiny magnitudes (below GROUP_MAX_EPS)
    out.append([(1 if i % 2 == 0 else -1) * (1 + i % 7) for i in range(N)])  # 4 mixed-sign integers
    out.append(gauss(1.0))                                    # 5 random normal
    r = gauss(0.02)                                           # 6 one outlier per row
    r[37] = 3.0
    r[300] = -1.5
    out.append(r)
    out.append([rng.random() for _ in range(N)])              # 7 all positive
    out.append([(i % 33) / 16.0 - 1.0 for i in range(N)])      # 8 grid values (rounding ties)
    out.append(gauss(1e4))                                    # 9 large but finite scales
    out.append(gauss(1e-6))                                   # 10 subnormal f16 scales
    out.append([-3.0] * N)                                    # 11 negative constant
    assert len(out) == NROWS
    return out


def main():
    dst = sys.argv[1] if len(sys.argv) > 1 else "."
    with open(f"{dst}/inputs.f32", "wb") as f:
        for r in rows():
            f.write(struct.pack(f"<{N}f", *r))


if __name__ == "__main__":
    main()
