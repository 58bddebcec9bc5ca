#!/usr/bin/env python3
"""Regenerates tests/data/lora/export_goldens.json with the llama.cpp peer.

For each case: `fucina synth` makes a base model (optionally `fucina quantize`d) and random
LoRA adapters (`fucina synth ADAPTER --lora-for BASE`, written by model::write_lora);
llama-export-lora merges them; the sha256 of every tensor of its output is recorded
(scripts/parity/gguf_tensor_sha256.py). tests/model/lora_parity_test.cpp regenerates the
same inputs with the library, checks their sha256, runs fucina's export-lora and compares
tensor bytes. Each case also records llama-completion's greedy text with `--lora` (our
adapter files loaded by llama.cpp) and checks it equals llama-completion's on fucina's merge.

  scripts/parity/make_lora_goldens.py BUILD_DIR      (needs BUILD_DIR/fucina and the peer)
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
build = sys.argv[1]
fucina = os.path.join(build, "fucina")
shared = os.environ.get("FUCINA_SHARED", os.path.join(repo, "..", "shared"))
peer = subprocess.check_output([os.path.join(shared, "peers", "llama-cpp.sh"), "--print"], text=True).strip()
prompt, n_predict = "Once upon a time", 16

# Must stay in step with tests/model/lora_parity_test.cpp (it reads these fields).
CASES = [
    {"name": "qwen3-f32-r8", "base": {"arch": "qwen3", "hidden": 64, "layers": 2, "heads": 4, "kv_heads": 2,
                                      "ffn": 172, "dtype": "f32", "seed": 1},
     "adapters": [{"rank": 8, "alpha": 16, "targets": "q,k,v,o", "seed": 3, "scale": 1.0}]},
    {"name": "qwen3-f16-r16-all", "base": {"arch": "qwen3", "hidden": 64, "layers": 2, "heads": 4, "kv_heads": 2,
                                           "ffn": 172, "dtype": "f16", "seed": 2},
     "adapters": [{"rank": 16, "alpha": 8, "targets": "q,k,v,o,gate,up,down", "seed": 4, "scale": 0.7}]},
    # Two adapters; ffn 170 makes ffn_down's n_in % 4 != 0 (ggml_vec_dot, not tinyBLAS);
    # rank 72 runs a 64-block plus a tail, rank 32 tinyBLAS where n_in allows.
    {"name": "llama-f32-two-adapters", "base": {"arch": "llama", "hidden": 64, "layers": 2, "heads": 4,
                                                "kv_heads": 4, "ffn": 170, "dtype": "f32", "seed": 5},
     "adapters": [{"rank": 72, "alpha": 0, "targets": "o,gate,up,down", "seed": 6, "scale": 1.0},
                  {"rank": 32, "alpha": 64, "targets": "o,gate,up,down", "seed": 7, "scale": -0.5}]},
    # A Q8_0 base: llama-export-lora writes the merged tensors in f16; fucina does that with
    # --type F16 (which also converts the unmerged tensors, so only merged ones compare).
    {"name": "qwen3-q8_0-r16", "base": {"arch": "qwen3", "hidden": 64, "layers": 2, "heads": 4, "kv_heads": 2,
                                        "ffn": 192, "dtype": "f32", "seed": 8, "quantize": "Q8_0"},
     "adapters": [{"rank": 16, "alpha": 32, "targets": "q,v,up", "seed": 9, "scale": 1.0}],
     "fucina_type": "F16", "compare": "merged"},
]


def run(args, **kw):
    return subprocess.run(args, check=True, capture_output=True, **kw)


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def tensor_hashes(path):
    out = run([sys.executable, os.path.join(repo, "scripts", "parity", "gguf_tensor_sha256.py"), path], text=True)
    return json.loads(out.stdout)


def complete(model, *extra):
    # llama-completion prints through common_log's worker thread, which at exit sometimes
    # loses the tail of stdout: keep the longest of a few runs (the others must be prefixes).
    runs = []
    for _ in range(5):
        r = run([os.path.join(peer, "llama-completion"), "-m", model, *extra, "-p", prompt, "-n", str(n_predict),
                 "--temp", "0", "-no-cnv", "-t", "2", "--no-warmup", "--seed", "1"])
        runs.append(r.stdout.hex())
    longest = max(runs, key=len)
    if not all(longest.startswith(x) for x in runs):
        sys.exit("llama-completion runs differ")
    return longest


def main():
    entries = []
    with tempfile.TemporaryDirectory() as work:
        for case in CASES:
            b = case["base"]
            base = os.path.join(work, case["name"] + ".gguf")
            run([fucina, "synth", base, "--arch", b["arch"], "--hidden", str(b["hidden"]), "--layers", str(b["layers"]),
                 "--heads", str(b["heads"]), "--kv-heads", str(b["kv_heads"]), "--ffn", str(b["ffn"]),
                 "--dtype", b["dtype"], "--seed", str(b["seed"])])
            if "quantize" in b:
                q = base + ".q.gguf"
                run([fucina, "quantize", base, q, b["quantize"]])
                base = q
            lora_args, fucina_args, adapter_sha = [], [], []
            for i, a in enumerate(case["adapters"]):
                path = os.path.join(work, f"{case['name']}.lora{i}.gguf")
                run([fucina, "synth", path, "--lora-for", base, "--rank", str(a["rank"]), "--alpha", str(a["alpha"]),
                     "--lora-targets", a["targets"], "--seed", str(a["seed"])])
                adapter_sha.append(sha256(path))
                lora_args += ["--lora-scaled", f"{path}:{a['scale']}"]  # llama.cpp's form
                fucina_args += ["--lora-scaled", path, str(a["scale"])]
            merged = os.path.join(work, case["name"] + ".merged.gguf")
            run([os.path.join(peer, "llama-export-lora"), "-m", base, *lora_args, "-o", merged, "-t", "2"])
            ours = os.path.join(work, case["name"] + ".fucina.gguf")
            extra = ["--type", case["fucina_type"]] if "fucina_type" in case else []
            run([fucina, "export-lora", base, *fucina_args, "-o", ours, *extra])
            with_lora = complete(base, *lora_args)
            on_ours = complete(ours)
            if with_lora != on_ours:
                sys.exit(f"{case['name']}: llama-completion --lora differs from llama-completion on fucina's merge")
            entry = dict(case)
            entry.update({"base_sha256": sha256(base), "adapter_sha256": adapter_sha,
                          "llama_export_lora_sha256": sha256(merged), "tensors": tensor_hashes(merged),
                          "completion_with_lora_hex": with_lora})
            entry.setdefault("compare", "all")
            entries.append(entry)
            print(case["name"], "ok", file=sys.stderr)

    commit = subprocess.run(["git", "-C", os.path.dirname(os.path.dirname(peer)), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "unknown"
    cpu = run(["bash", os.path.join(repo, "scripts", "parity", "cpu_name.sh")], text=True).stdout.strip()
    doc = {"oracle": f"llama.cpp {commit} llama-export-lora -t 2, llama-completion --temp 0 -t 2",
           "cpu": cpu, "made": subprocess.check_output(["date", "-u", "+%F"], text=True).strip(),
           "prompt": prompt, "n_predict": n_predict, "cases": entries}
    out = os.path.join(repo, "tests", "data", "lora", "export_goldens.json")
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print("wrote", out, file=sys.stderr)


main()
