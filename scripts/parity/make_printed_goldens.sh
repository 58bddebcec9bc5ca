#!/usr/bin/env bash
# Goldens for the printed-text cases ../shared's goldens do not cover: SentencePiece
# completions whose first piece starts with a space ("Once upon a time" -> " éd bez ..."),
# which llama.cpp prints and a detokenize-style decoder drops (issue 16). Same format as
# ../shared/models/*.golden.json cases (prompt, prompt_tokens, greedy, greedy_text_hex),
# from THIS machine's llama.cpp peer build (llama-oracle, 2 threads).
#
# Output: tests/data/printed_text/<model>.json; read by tests/generate/printed_text_parity_test.cpp.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
shared=${SHARED:-$here/../shared}
bin=$("$shared/peers/llama-cpp.sh" --print 2>/dev/null || echo "$HOME/.cache/fucina-peers/llama.cpp/build/bin")
oracle=$bin/llama-oracle
[[ -x $oracle ]] || { echo "make_printed_goldens.sh: $oracle missing (run ../shared/peers/llama-cpp.sh)" >&2; exit 2; }
out=$here/tests/data/printed_text
mkdir -p "$out"
LD_LIBRARY_PATH=$bin /usr/bin/python3 - "$oracle" "$shared/models/tiny-llama-spm-f32.gguf" "$out/tiny-llama-spm-f32.json" \
  "$(bash "$(dirname "$0")/cpu_name.sh")" <<'PY'
import json, subprocess, sys, tempfile
oracle, model, dst, cpu = sys.argv[1:]
logits = tempfile.NamedTemporaryFile(suffix=".f32")  # the oracle writes one; unused here
cases = []
for prompt in ["Once upon a time", "I like", "Paris is"]:
    r = subprocess.run([oracle, model, prompt, "32", logits.name, "2"], check=True, capture_output=True, text=True)
    o = json.loads(r.stdout)
    assert o["greedy_text_hex"].startswith("20"), f"{prompt!r}: the first piece has no leading space"
    cases.append({"prompt": prompt, "prompt_tokens": o["prompt_tokens"], "greedy": o["greedy"],
                  "greedy_text_hex": o["greedy_text_hex"]})
json.dump({"oracle": "llama.cpp peer build (../shared/peers/llama-cpp.sh), llama-oracle, CPU, 2 threads", "cpu": cpu,
           "cases": cases}, open(dst, "w"))
print(f"{dst}: {len(cases)} prompts")
PY
