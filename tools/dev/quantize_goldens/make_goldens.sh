#!/usr/bin/env bash
# Regenerates tests/data/quantize/goldens.json: sha256 of llama-quantize's output for each
# (model, TYPE, flags) the quantize tests check. Needs the llama.cpp peer
# (../shared/peers/llama-cpp.sh), a build tree with libfucina.a, g++ and python3.
#   tools/dev/quantize_goldens/make_goldens.sh BUILD_DIR
set -euo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
build=${1:?usage: make_goldens.sh BUILD_DIR (with libfucina.a)}
shared=${FUCINA_SHARED:-$repo/../shared}
bin=$("$shared/peers/llama-cpp.sh" --print)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

g++ -std=c++20 -O2 -ffp-contract=off -march=native -I"$repo/include" -I"$repo/tests" \
  "$repo/tools/dev/quantize_goldens/write_synth.cpp" "$build/libfucina.a" -lfmt -o "$work/write_synth"
"$work/write_synth" "$work" > /dev/null

types="COPY F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K IQ4_NL TQ1_0 TQ2_0"
variants=()
for t in $types; do variants+=("$t|"); done
for t in Q4_0 Q2_K Q3_K_M Q4_K_M Q5_K_M TQ1_0; do variants+=("$t|--pure"); done
variants+=("Q4_K_M|--leave-output-tensor" "Q3_K_L|--leave-output-tensor")
# Metadata overrides (no spaces inside a flag's value: the flags are split on spaces).
variants+=("F16|--override-kv general.name=str:fucina-default"
           "Q8_0|--override-kv general.file_type=int:-7 --override-kv fucina.flag=bool:true --override-kv fucina.scale=float:0.5")

rows="$work/rows.tsv"
: > "$rows"
quantize_all() {  # source name path
  local src=$1 name=$2 path=$3
  for v in "${variants[@]}"; do
    local t=${v%%|*} flag=${v#*|}
    # shellcheck disable=SC2086
    "$bin/llama-quantize" $flag "$path" "$work/out.gguf" "$t" 2 > "$work/log" 2>&1 || { cat "$work/log"; exit 1; }
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$src" "$name" "$(sha256sum < "$path" | cut -d' ' -f1)" "$t" "$flag" \
      "$(sha256sum < "$work/out.gguf" | cut -d' ' -f1)" >> "$rows"
  done
}
for f in "$work"/synth-*.gguf; do quantize_all synthetic "$(basename "$f" .gguf)" "$f"; done
for m in tiny-qwen3-f16 tiny-llama-spm-f32 tiny-qwen3moe-f16; do quantize_all shared "$m" "$shared/models/$m.gguf"; done

commit=$(git -C "$bin/../.." rev-parse --short HEAD 2>/dev/null || echo unknown)
python3 - "$rows" "$commit" > "$repo/tests/data/quantize/goldens.json" <<'PY'
import json, sys
models = {}
for line in open(sys.argv[1]):
    src, name, ish, t, flag, osh = line.rstrip("\n").split("\t")
    m = models.setdefault(name, {"name": name, "source": src, "input_sha256": ish, "outputs": []})
    m["outputs"].append({"type": t, "flags": flag, "sha256": osh})
print(json.dumps({"oracle": f"llama.cpp {sys.argv[2]} llama-quantize (2 threads)",
                  "models": list(models.values())}, indent=1))
PY
echo "wrote $repo/tests/data/quantize/goldens.json"
