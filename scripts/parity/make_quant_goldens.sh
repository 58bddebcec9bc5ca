#!/usr/bin/env bash
# Regenerates tests/data/quant_parity/: llama.cpp's teacher-forced logits summaries for
# quantized versions of the shared tiny models and of one synthetic 256-wide model (so
# K-quant kernels really run). Needs the llama.cpp peer (../shared/peers/llama-cpp.sh) and a
# build tree with the `fucina` CLI (for `fucina synth`).
#   scripts/parity/make_quant_goldens.sh BUILD_DIR
# FULL_DIR=dir additionally dumps llama.cpp's full logits rows (dir/<model>.<FORMAT>.f32,
# ~78 MB each for the 151936-token vocab) for measuring the estimator; see the README.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: make_quant_goldens.sh BUILD_DIR (with the fucina CLI)}
shared=${FUCINA_SHARED:-$repo/../shared}
bin=$("$shared/peers/llama-cpp.sh" --print)
src=$(cd "$bin/../.." && pwd)
out=$repo/tests/data/quant_parity
text=$out/text.txt
n_tokens=128
formats=${FORMATS:-"Q8_0 Q4_0 Q4_K_M Q6_K"}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

c++ -O2 -std=c++17 -I "$src/include" -I "$src/ggml/include" "$repo/scripts/parity/teacher_force_oracle.cpp" \
  -o "$work/oracle" -L "$bin" -lllama -lggml -lggml-base -Wl,-rpath,"$bin"

# Must match the spec in tests/model/quant_parity_test.cpp (synth_spec()).
"$build/fucina" synth "$work/synth-qwen3-256.gguf" --arch qwen3 --vocab "$shared/vocab/ggml-vocab-llama-spm.gguf" \
  --hidden 256 --layers 2 --heads 4 --kv-heads 2 --head-dim 64 --ffn 512 --dtype f16 --seed 7 > /dev/null

models=()
for m in "$shared"/models/*.gguf; do models+=("$m"); done
models+=("$work/synth-qwen3-256.gguf")

rm -f "$out"/*.bin
entries=()
for m in "${models[@]}"; do
  name=$(basename "$m" .gguf)
  for t in $formats; do
    "$bin/llama-quantize" "$m" "$work/q.gguf" "$t" 2 > "$work/log" 2>&1 || { cat "$work/log"; exit 1; }
    sha=$(sha256sum < "$work/q.gguf" | cut -d' ' -f1)
    full=-
    [[ -n "${FULL_DIR:-}" ]] && { mkdir -p "$FULL_DIR"; full=$FULL_DIR/$name.$t.f32; }
    entries+=("$("$work/oracle" "$work/q.gguf" "$text" "$n_tokens" "$out/$name.$t.bin" "$name" "$t" "$sha" "$full" 2)")
    echo "$name $t: $(stat -c %s "$out/$name.$t.bin") bytes" >&2
  done
done

commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)
{
  printf '{"oracle": "llama.cpp %s, CPU, 2 threads, scripts/parity/teacher_force_oracle.cpp",\n' "$commit"
  printf ' "cpu": "%s", "made": "%s",\n' "$(bash "$repo/scripts/parity/cpu_name.sh")" "$(date -u +%F)"
  printf ' "text": "text.txt", "n_tokens": %d, "top": 32, "samples": 64,\n "goldens": [\n' "$n_tokens"
  sep=""
  for e in "${entries[@]}"; do printf '%s  %s' "$sep" "$e"; sep=$',\n'; done
  printf '\n ]}\n'
} > "$out/goldens.json"
echo "wrote $out ($(du -sh "$out" | cut -f1))"
