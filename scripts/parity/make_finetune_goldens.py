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
import hashlib
import json
import os
import subprocess
import sys
import socket
import tempfile
import time
import urllib.request
from datetime import date

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data", "finetune")
BIN = os.path.expanduser("~/.cache/fucina-peers/llama.cpp/build/bin")


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Server:
    """llama-server on a loopback port (llama-completion at this commit drops its printed text
    now and then: its log thread is not flushed at exit; the server answers in JSON)."""

    def __init__(self, model, lora=None):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        cmd = [os.path.join(BIN, "llama-server"), "-m", model, "--port", str(self.port), "--host", "127.0.0.1", "-t", "2",
               "-np", "1", "-c", "512"]
        if lora:
            cmd += ["--lora", lora]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(300):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health") as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise SystemExit("llama-server did not start")

    def complete(self, prompt, n):
        body = json.dumps({"prompt": prompt, "n_predict": n, "temperature": 0, "seed": 0, "cache_prompt": False}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/completion", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req) as r:
            return json.loads(r.read())["content"]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait()


def completions(model, prompts, n, lora=None):
    with Server(model, lora) as srv:
        return [srv.complete(q, n) for q in prompts]


def main():
    fucina = os.path.abspath(sys.argv[1])
    spec = json.load(open(os.path.join(DATA, "finetune.json")))
    prompts = [json.loads(l)["prompt"] for l in open(os.path.join(DATA, "qa.jsonl")) if l.strip()]
    out = {"made_by": "scripts/parity/make_finetune_goldens.py", "made": str(date.today()),
           "cpu": subprocess.run(["bash", os.path.join(ROOT, "scripts", "parity", "cpu_name.sh")], capture_output=True,
                                 text=True).stdout.strip(),
           "llama_cpp": subprocess.run(["git", "-C", os.path.dirname(os.path.dirname(BIN)), "rev-parse", "--short", "HEAD"],
                                       capture_output=True, text=True).stdout.strip(),
           "sha256": {}, "outputs": {}}
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
