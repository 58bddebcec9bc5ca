#!/usr/bin/env python3
"""Goldens for tests/model/default_model_test.cpp: what llama.cpp makes of the shipped default
model, models/fucina-default.gguf (docs/DEFAULT-MODEL.md), on this machine.

usage: make_default_model_goldens.py

- llama-tokenize's ids for tests/data/default-model/val-sample.txt (a piece of the held-out
  text);
- llama-perplexity's printed lines on that text with -c 256 (the test runs `fucina perplexity`
  with the same flags and compares the printed numbers);
- llama-server's greedy continuations (temperature 0, 48 tokens) of three prompts.
Writes tests/data/default-model/goldens.json with the model's sha256 and the machine.
"""
import json
import os
import re
import subprocess

from llama_peer import BIN, ROOT, completions, provenance, sha

DATA = os.path.join(ROOT, "tests", "data", "default-model")
MODEL = os.path.join(ROOT, "models", "fucina-default.gguf")
PROMPTS = ["Call me Ishmael.", "The state of the Union is", "The whale"]
N_PREDICT = 48
CTX = 256


def main():
    text = os.path.join(DATA, "val-sample.txt")
    out = provenance("scripts/parity/make_default_model_goldens.py") | {"model_sha256": sha(MODEL)}
    ids = subprocess.run([os.path.join(BIN, "llama-tokenize"), "-m", MODEL, "-f", text, "--ids", "--log-disable",
                          "--no-parse-special"], check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    out["llama_tokenize_ids"] = json.loads(ids)
    ppl = subprocess.run([os.path.join(BIN, "llama-perplexity"), "-m", MODEL, "-f", text, "-c", str(CTX), "-b", str(CTX),
                          "-t", "2"], check=True, capture_output=True, text=True)
    log = ppl.stdout + ppl.stderr
    out["perplexity"] = {"ctx": CTX, "chunks": re.search(r"(\[1\][^\n]*,)", log).group(1),
                         "final": re.search(r"(Final estimate: PPL = [^\n]*)", log).group(1)}
    out["prompts"] = PROMPTS
    out["n_predict"] = N_PREDICT
    out["greedy"] = completions(MODEL, PROMPTS, N_PREDICT)
    with open(os.path.join(DATA, "goldens.json"), "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(out["perplexity"], out["greedy"], sep="\n")


if __name__ == "__main__":
    main()
