#!/usr/bin/env bash
# Goldens for tests/model/kv_q8_parity_test.cpp: llama.cpp (the peer build of
# ../shared/peers/llama-cpp.sh) with a q8_0 KV cache and flash attention on (llama-cli's
# -ctk q8_0 -ctv q8_0 -fa on), on the tiny qwen3 and qwen3moe models of ../shared/models.
# The oracle is ../shared/peers/llama_oracle.cpp with those three context parameters set.
#
# Output: tests/data/kv_q8/<model>.json: the prompt's ids, top-5 and 32 greedy ids (the
# oracle's JSON), the CPU, and a logit sample (every 151st id) of the last prompt position.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
shared=${SHARED:-$here/../shared}
bin=$("$shared/peers/llama-cpp.sh" --print 2>/dev/null || echo "$HOME/.cache/fucina-peers/llama.cpp/build/bin")
src=$(cd "$bin/../.." && pwd)
out=$here/tests/data/kv_q8
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed 's/auto cp = llama_context_default_params();/auto cp = llama_context_default_params(); cp.type_k = GGML_TYPE_Q8_0; cp.type_v = GGML_TYPE_Q8_0; cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;/' \
  "$shared/peers/llama_oracle.cpp" >"$tmp/oracle_q8.cpp"
grep -q GGML_TYPE_Q8_0 "$tmp/oracle_q8.cpp" || { echo "make_kv_q8_goldens.sh: the oracle changed, patch failed" >&2; exit 2; }
g++ -O2 -std=c++17 -I"$src/include" -I"$src/ggml/include" "$tmp/oracle_q8.cpp" -L"$bin" -lllama -lggml -lggml-base \
  -Wl,-rpath,"$bin" -o "$tmp/oracle_q8"
prompt="Once upon a time there was a little"
for name in tiny-qwen3-f16 tiny-qwen3moe-f16; do
  "$tmp/oracle_q8" "$shared/models/$name.gguf" "$prompt" 32 "$tmp/$name.f32" 2 >"$tmp/$name.json"
  /usr/bin/python3 - "$tmp/$name.json" "$tmp/$name.f32" "$prompt" "$(bash "$here/scripts/parity/cpu_name.sh")" \
    >"$out/$name.json" <<'PY'
import json, struct, sys
j = json.load(open(sys.argv[1]))
raw = open(sys.argv[2], "rb").read()
logits = struct.unpack(f"<{len(raw) // 4}f", raw)
j["prompt"] = sys.argv[3]
j["cpu"] = sys.argv[4]
j["kv_type"] = "q8_0"
j["logit_sample"] = [[i, logits[i]] for i in range(0, len(logits), 151)]
print(json.dumps(j))
PY
done
