#!/usr/bin/env bash
# Goldens for tests/model/decode_parity_test.cpp: for every model of
# tests/data/llm_parity/synth_matrix.json (made here with `fucina synth`), llama.cpp's logits
# along its greedy path (decode_oracle.cpp) for every prompt, written to
# tests/data/llm_parity/<name>.decode.json with the model file's sha256 (the test checks
# that its own `fucina synth` output is the same file) and the CPU that made them
# (llama.cpp's f16 results depend on it).
#   scripts/parity/make_decode_goldens.sh BUILD_DIR    (a build tree with the fucina CLI)
# Needs the llama.cpp peer (../shared/peers/llama-cpp.sh). Never run in CI.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: make_decode_goldens.sh BUILD_DIR}
shared=${FUCINA_SHARED:-$repo/../shared}
bin=${LLAMA_BIN:-$("$shared/peers/llama-cpp.sh" --print)}
src=$(cd "$bin/../.." && pwd)
data=$repo/tests/data/llm_parity
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
c++ -O2 -std=c++17 -I "$src/include" -I "$src/ggml/include" "$repo/scripts/parity/decode_oracle.cpp" \
  -o "$work/oracle" -L "$bin" -lllama -lggml -lggml-base -Wl,-rpath,"$bin"
build_rev=$(git -C "$src" log -1 --format=%h 2>/dev/null || echo unknown)
/usr/bin/python3 - "$data/synth_matrix.json" "$build/fucina" "$work" "$data" "$build_rev" "$(bash "$repo/scripts/parity/cpu_name.sh")" <<'PY'
import hashlib, json, os, subprocess, sys, datetime
matrix_path, cli, work, data, rev, cpu = sys.argv[1:]
m = json.load(open(matrix_path))
for spec in m["models"]:
    gguf = os.path.join(work, spec["name"] + ".gguf")
    subprocess.run([cli, "synth", gguf, *spec["flags"]], check=True, capture_output=True)
    sha = hashlib.sha256(open(gguf, "rb").read()).hexdigest()
    cases = []
    for p in m["prompts"]:
        pf = os.path.join(work, "prompt.txt")
        open(pf, "w").write(p)
        r = subprocess.run([os.path.join(work, "oracle"), gguf, pf, str(m["n_predict"]), str(m["threads"]), str(m["n_ctx"])],
                           check=True, capture_output=True, text=True)
        c = json.loads(r.stdout)
        c["prompt"] = p
        cases.append(c)
    out = {"model": spec["name"], "sha256": sha,
           "oracle": f"llama.cpp {rev} (../shared/peers/llama-cpp.sh), CPU, {m['threads']} threads, n_ctx {m['n_ctx']}, default context (flash attention auto, f16 KV)",
           "cpu": cpu, "made": datetime.date.today().isoformat(), "cases": cases}
    dst = os.path.join(data, spec["name"] + ".decode.json")
    with open(dst + ".tmp", "w") as f:
        json.dump(out, f, separators=(",", ":"))
    os.replace(dst + ".tmp", dst)
    print(f"{dst}: {len(cases)} prompts, prompt tokens {[len(c['prompt_tokens']) for c in cases]}")
PY
