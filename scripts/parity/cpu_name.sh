#!/usr/bin/env bash
# The CPU that makes a golden, as the goldens record it (`cpu`): llama.cpp's f16 results
# depend on it (a build with AVX512-FP16 sums one-row f16 dots in f16 arithmetic).
set -euo pipefail
model=$(grep -m1 '^model name' /proc/cpuinfo | sed 's/^[^:]*: *//')
flags=$(grep -m1 '^flags' /proc/cpuinfo)
has() { [[ " $flags " == *" $1 "* ]] && echo yes || echo no; }
echo "$model; avx512f=$(has avx512f), avx512_fp16=$(has avx512_fp16)"
