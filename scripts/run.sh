#!/usr/bin/env bash
# The one run command: installs dependencies, builds the `fucina` CLI (release preset)
# and runs `fucina run` with the given arguments. Without a model path, `fucina run` uses
# the project's own default model, models/fucina-default.gguf (a small llama that Fucina
# trained on Moby-Dick and the State of the Union addresses, docs/DEFAULT-MODEL.md); with no
# arguments at all it continues a line of Moby-Dick.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target fucina_cli >/dev/null
[[ $# -eq 0 ]] && set -- -p "Call me Ishmael. Some years ago" -n 64
exec ./build/release/fucina run "$@"
