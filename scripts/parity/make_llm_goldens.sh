#!/usr/bin/env bash
# Goldens for tests/model/llm_parity_test.cpp from THIS machine's llama.cpp (the peer build
# of ../shared/peers/llama-cpp.sh), for every model and prompt of ../shared/models.
#
# Why besides ../shared's goldens: they pin the BF16 conversion of tiny-llama too, and
# record which CPU made them (`cpu`): llama.cpp's f16 results depend on it (a build with
# AVX512-FP16 sums one-row f16 dots in f16 arithmetic and lands up to 2e-3 away).
#
# Output: tests/data/llm_parity/<model>.json: per prompt the ids, top-5, 32 greedy ids (and
# the bytes llama.cpp prints for them, greedy_text_hex), and a
# logit sample (the top 64 plus every 151st id) of the last prompt position.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
shared=${SHARED:-$here/../shared}
bin=$("$shared/peers/llama-cpp.sh" --print 2>/dev/null || echo "$HOME/.cache/fucina-peers/llama.cpp/build/bin")
oracle=$bin/llama-oracle
[[ -x $oracle ]] || { echo "make_llm_goldens.sh: $oracle missing (run ../shared/peers/llama-cpp.sh)" >&2; exit 2; }
out=$here/tests/data/llm_parity
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The BF16 case: tiny-llama converted by llama-quantize (fucina quantize is byte-exact with it).
"$bin/llama-quantize" "$shared/models/tiny-llama-spm-f32.gguf" "$tmp/tiny-llama-spm-bf16.gguf" BF16 >/dev/null 2>&1
for golden in "$shared"/models/*.golden.json "$shared/models/tiny-llama-spm-f32.golden.json:bf16"; do
  name=$(basename "${golden%:bf16}" .golden.json)
  model=$shared/models/$name.gguf
  if [[ $golden == *:bf16 ]]; then golden=${golden%:bf16}; name=tiny-llama-spm-bf16; model=$tmp/$name.gguf; fi
  /usr/bin/python3 - "$golden" "$model" "$oracle" "$tmp" "$out/$name.json" "$(bash "$here/scripts/parity/cpu_name.sh")" <<'PY'
import json, subprocess, sys, struct, os
golden, model, oracle, tmp, dst, cpu = sys.argv[1:]
g = json.load(open(golden))
cases = []
for i, c in enumerate(g["cases"]):
    lf = os.path.join(tmp, f"p{i}.f32")
    r = subprocess.run([oracle, model, c["prompt"], str(len(c["greedy"])), lf, "2"], check=True,
                       capture_output=True, text=True)
    o = json.loads(r.stdout)
    raw = open(lf, "rb").read()
    logits = struct.unpack(f"<{len(raw) // 4}f", raw)
    top = sorted(range(len(logits)), key=lambda k: -logits[k])[:64]
    ids = sorted(set(top) | set(range(0, len(logits), 151)))
    cases.append({"prompt": c["prompt"], "prompt_tokens": o["prompt_tokens"], "last_top5": o["last_top5"],
                  "greedy": o["greedy"], "greedy_text_hex": o["greedy_text_hex"], "n_vocab": len(logits),
                  "logit_sample": [[k, logits[k]] for k in ids]})
import datetime
json.dump({"oracle": "llama.cpp peer build (../shared/peers/llama-cpp.sh), CPU, 2 threads",
           "cpu": cpu, "made": datetime.date.today().isoformat(),
           "cases": cases}, open(dst, "w"))
print(f"{dst}: {len(cases)} prompts")
PY
done
