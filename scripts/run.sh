#!/usr/bin/env bash
# The one run command: installs dependencies, builds the `fucina` CLI (release preset)
# and runs `fucina run` with the given arguments (no model: it says how to get one).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target fucina_cli >/dev/null
exec ./build/release/fucina run "$@"
