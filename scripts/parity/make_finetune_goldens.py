#!/usr/bin/env python3
"""Goldens for tests/train/finetune_cli_test.cpp (tests/data/finetune/finetune.json says what).

usage: make_finetune_goldens.py FUCINA_BINARY

Runs the test's fucina commands (synth, finetune --lora and full, export-lora, quantize
Q8_0), then llama.cpp's llama-server (/completion) at temperature 0 on every question with the adapter
(--lora), the merged + quantized adapter, the fully trained model and its Q8_0 copy, and
writes what llama.cpp printed after the prompt to tests/data/finetune/goldens.json, with the
sha256 of the files it read (the test checks them, so a golden is never compared against a
different model) and the machine.
"""
import json
import os
import sys
import tempfile

from llama_peer import ROOT, completions, provenance, run, sha

DATA = os.path.join(ROOT, "tests", "data", "finetune")


def main():
    fucina = os.path.abspath(sys.argv[1])
    spec = json.load(open(os.path.join(DATA, "finetune.json")))
    prompts = [json.loads(l)["prompt"] for l in open(os.path.join(DATA, "qa.jsonl")) if l.strip()]
    out = provenance("scripts/parity/make_finetune_goldens.py") | {"sha256": {}, "outputs": {}}
    with tempfile.TemporaryDirectory() as t:
        p = lambda name: os.path.join(t, name)  # noqa: E731
        run([fucina, "synth", p("base.gguf")] + spec["synth"])
        run([fucina, "finetune", p("base.gguf"), "--data", os.path.join(DATA, "qa.jsonl"), "-o", p("lora.gguf")] + spec["lora"])
        run([fucina, "export-lora", p("base.gguf"), "--lora", p("lora.gguf"), "-o", p("merged.gguf")])
        run([fucina, "quantize", p("merged.gguf"), p("merged-q8_0.gguf"), "Q8_0"])
        run([fucina, "finetune", p("base.gguf"), "--data", os.path.join(DATA, "qa.jsonl"), "-o", p("full.gguf")] + spec["full"])
        run([fucina, "quantize", p("full.gguf"), p("full-q8_0.gguf"), "Q8_0"])
        for f in ["base", "lora", "merged-q8_0", "full", "full-q8_0"]:
            out["sha256"][f] = sha(p(f + ".gguf"))
        n = spec["n_predict"]
        out["outputs"]["lora"] = completions(p("base.gguf"), prompts, n, p("lora.gguf"))
        for f in ["merged-q8_0", "full", "full-q8_0"]:
            out["outputs"][f] = completions(p(f + ".gguf"), prompts, n)
    with open(os.path.join(DATA, "goldens.json"), "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    for k, v in out["outputs"].items():
        print(k, v[:3])


if __name__ == "__main__":
    main()
