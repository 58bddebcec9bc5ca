"""llama.cpp as an oracle for the golden-making scripts: its built tools, a llama-server on a
loopback port, and where a golden came from (machine, llama.cpp commit)."""
import hashlib
import json
import os
import socket
import subprocess
import time
import urllib.request
from datetime import date

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("PEERS", os.path.expanduser("~/.cache/fucina-peers/llama.cpp/build/bin"))


def provenance(made_by):
    """The fields every goldens file starts with."""
    return {"made_by": made_by, "made": str(date.today()),
            "cpu": subprocess.run(["bash", os.path.join(ROOT, "scripts", "parity", "cpu_name.sh")], capture_output=True,
                                  text=True).stdout.strip(),
            "llama_cpp": subprocess.run(["git", "-C", os.path.dirname(os.path.dirname(BIN)), "rev-parse", "--short", "HEAD"],
                                        capture_output=True, text=True).stdout.strip()}


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


