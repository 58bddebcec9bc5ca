#!/usr/bin/env python3
"""Load for an OpenAI-compatible server (fucina serve, llama-server): C concurrent clients,
each streaming completions back to back for S seconds (or R requests each), then one JSON
line: aggregate generated tokens/s, time-to-first-token p50/p99, requests, errors, and,
with --pid, the server's RSS at start, end and peak (sampled every second) and once a
minute (a soak's flatness: the first minute includes the HTTP threads' first use).

  bench/serve_load.py --url http://127.0.0.1:8080 --clients 8 --seconds 60 [--max-tokens 64]
                      [--requests N] [--prompt-words 32] [--pid PID] [--label NAME]

Loopback only; bounded in count and time. Standard library only.
"""
import argparse
import http.client
import json
import statistics
import threading
import time
import urllib.parse


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--requests", type=int, default=0, help="per client; 0: until --seconds")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompt-words", type=int, default=32)
    ap.add_argument("--pid", type=int, default=0)
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    u = urllib.parse.urlparse(a.url)
    assert u.hostname in ("127.0.0.1", "localhost", "::1"), "loopback only"
    deadline = time.monotonic() + a.seconds
    lock = threading.Lock()
    ttfts, tokens, errors, done = [], [0], [], [0]

    def client(k):
        n = 0
        while time.monotonic() < deadline and (a.requests == 0 or n < a.requests):
            n += 1
            words = " ".join(f"w{(k * 7919 + n * 31 + i) % 997}" for i in range(a.prompt_words))
            body = {"prompt": f"Client {k} request {n}: {words}", "max_tokens": a.max_tokens, "temperature": 0,
                    "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
            t0 = time.monotonic()
            first, got = None, 0
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)  # one per request, as for both servers
            try:
                conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                if r.status != 200:
                    r.read()
                    raise RuntimeError(r.status)
                for line in r:
                    if not line.startswith(b"data: "):
                        continue
                    if line.startswith(b"data: [DONE]"):
                        break
                    chunk = json.loads(line[6:])
                    if first is None and any(c.get("text") for c in chunk.get("choices", [])):
                        first = time.monotonic() - t0
                    if chunk.get("usage"):
                        got = chunk["usage"]["completion_tokens"]
            except Exception as e:
                with lock:
                    errors.append(repr(e))
                continue
            finally:
                conn.close()
            with lock:
                if first is not None:
                    ttfts.append(first)
                tokens[0] += got
                done[0] += 1

    rss = []
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            rss.append(rss_kib(a.pid))
            stop.wait(1.0)

    if a.pid:
        threading.Thread(target=sample, daemon=True).start()
    t0 = time.monotonic()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(a.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    stop.set()
    q = sorted(ttfts)
    pct = lambda p: q[min(len(q) - 1, int(p * len(q)))] * 1e3 if q else None
    out = {"label": a.label, "clients": a.clients, "seconds": round(wall, 2), "requests": done[0], "errors": len(errors),
           "tokens": tokens[0], "tokens_per_second": round(tokens[0] / wall, 2),
           "ttft_p50_ms": pct(0.50) and round(pct(0.50), 1), "ttft_p99_ms": pct(0.99) and round(pct(0.99), 1),
           "ttft_mean_ms": round(statistics.mean(q) * 1e3, 1) if q else None}
    if errors:
        out["first_error"] = errors[0]
    if rss:
        out.update({"rss_start_kib": rss[0], "rss_end_kib": rss[-1], "rss_max_kib": max(rss),
                    "rss_kib_by_minute": rss[::60]})
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
