#!/usr/bin/env bash
# The one run command: installs dependencies, builds the `fucina` CLI (release preset)
# and runs `fucina run` with the given arguments. Without a model path (first argument
# not a file), it first makes the project's own tiny random-weight Qwen3-architecture
# model with `fucina synth` (build/tiny-qwen3.gguf; its text is gibberish by design) and
# runs on that, so the command works on a fresh machine with nothing downloaded.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target fucina_cli >/dev/null
if [[ $# -eq 0 || $1 == -* ]]; then
  model=build/tiny-qwen3.gguf
  if [[ ! -f $model ]]; then
    ./build/release/fucina synth "$model" --arch qwen3 --hidden 256 --layers 4 --heads 4 --kv-heads 2 \
      --ffn 768 --dtype f16 --seed 1
  fi
  echo "run.sh: no model given; using $model (random weights: gibberish text). Pass MODEL.gguf first to use yours." >&2
  [[ $# -eq 0 ]] && set -- -p "Once upon a time" -n 32
  exec ./build/release/fucina run "$model" "$@"
fi
exec ./build/release/fucina run "$@"
