#!/usr/bin/env bash
# Regenerates tests/data/chat/*.txt (chat-template goldens) with llama.cpp itself.
# Needs the peer build (../shared/peers/llama-cpp.sh) and ../shared/vocab + ../shared/models.
# Output naming: tests/data/chat/<gguf-stem>.<case>[.raw|.legacy].txt; see chat_template_oracle.cpp.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
shared="${FUCINA_SHARED:-$repo/../shared}"
peer="${LLAMA_CPP_DIR:-$HOME/.cache/fucina-peers/llama.cpp}"
bin="$peer/build/bin"
out="$repo/tests/data/chat"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

g++ -std=c++17 -O1 -o "$work/oracle" "$here/chat_template_oracle.cpp" \
  -I"$peer/include" -I"$peer/common" -I"$peer/ggml/include" -I"$peer/vendor" \
  -L"$bin" -lllama-common -lllama -lggml -lggml-base -Wl,-rpath,"$bin"

mkdir -p "$out"
run() { "$work/oracle" "$1" "$out" "$2" 2> "$work/$2.log" || { cat "$work/$2.log"; exit 1; }; }
run "$shared/vocab/ggml-vocab-command-r.gguf" command-r
run "$shared/vocab/ggml-vocab-phi-3.gguf" phi-3
run "$shared/vocab/ggml-vocab-qwen2.gguf" qwen2
# A model without tokenizer.chat_template: llama.cpp falls back to ChatML.
run "$shared/models/tiny-llama-spm-f32.gguf" no-template
echo "llama.cpp $(git -C "$peer" rev-parse HEAD 2>/dev/null || echo '?')" > "$out/ORACLE_VERSION"
# The legacy (non-jinja) llama_chat_apply_template renders are only compared, not kept.
for f in "$out"/*.legacy.txt; do
  jinja="${f%.legacy.txt}.txt"
  if ! cmp -s "$f" "$jinja"; then echo "legacy llama_chat_apply_template differs: $(basename "$jinja")"; fi
  rm -f "$f"
done
