#!/usr/bin/env bash
# The one test command: installs dependencies, builds the release and the scalar-only
# configurations and runs the whole CTest suite on both, then builds the whole tree with
# clang (the fuzz preset: clang 14, -Werror, ASan + UBSan, libFuzzer) and runs each fuzzer
# for 30 s (docs/SAFETY.md).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install-deps.sh
JOBS="${JOBS:-$(nproc)}"
for preset in release scalar; do
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$JOBS"
done
ctest --preset release -j "$JOBS"
ctest --preset scalar -j "$JOBS" -L unit
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$JOBS"
ctest --preset fuzz -L fuzz -j "$JOBS"
