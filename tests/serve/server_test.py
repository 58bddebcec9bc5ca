#!/usr/bin/env python3
"""HTTP tests of `fucina serve` against a spawned server on a free loopback port, with a
random-weight model made by `fucina synth` (stdlib only).

usage: server_test.py FUCINA_BIN WORK_DIR SUITE    (SUITE: api | concurrency | malformed)
  api          error shapes, API key, 413, 429 with Retry-After, timeout, /metrics, /health,
               /tokenize, client-disconnect cancellation
  concurrency  32 concurrent streamed requests over 8 slots, each equal to its solo run at
               temperature 0, run together, and equal to the same streams with --spec off;
               streams left mid-way free their sequences' KV
  malformed    >= 10,000 malformed requests (bad JSON, wrong types, huge numbers, invalid
               UTF-8, missing fields, random bytes, half-sent requests): always a 4xx or a
               closed connection, the server stays up and then serves a valid request
"""
import http.client
import json
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time

FUCINA, WORK, SUITE = sys.argv[1], sys.argv[2], sys.argv[3]
FAILURES = []


def check(cond, what):
    if not cond:
        what = what if len(what) < 600 else what[:600] + "..."
        FAILURES.append(what)
        print(f"FAIL: {what}", flush=True)


def synth_model(name, *flags):
    os.makedirs(WORK, exist_ok=True)
    path = os.path.join(WORK, name)
    subprocess.run([FUCINA, "synth", path, "--arch", "qwen3", "--dtype", "f16", "--seed", "3", *flags],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return path


def q8_model(name):
    """A random model whose every matrix is Q8_0: its products are row-independent, so a
    sequence's logits are the same batched or alone (model.hpp Note [Batched forward]). An f16
    model's batched rows take another summation order, and its random logits have near-ties
    that a last-bit difference can flip within 96 greedy tokens. (FFN 192: rows of whole
    32-blocks, so no matrix falls back to f16.)"""
    f16 = synth_model(name + ".f16.gguf", "--ffn", "192")
    path = os.path.join(WORK, name)
    subprocess.run([FUCINA, "quantize", f16, path, "q8_0"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return path


class Server:
    """A `fucina serve` child; its stderr log is kept in self.log."""

    def __init__(self, model, *flags, key=None):
        self.auth = {"Authorization": f"Bearer {key}"} if key else {}
        if key:
            flags = (*flags, "--api-key", key)
        self.proc = subprocess.Popen([FUCINA, "serve", model, "--port", "0", "-t", "1", *flags],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace")
        self.log, self.port = [], None
        ready = threading.Event()

        def pump():
            for line in self.proc.stderr:
                self.log.append(line)
                m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
                if m:
                    self.port = int(m.group(1))
                if line.rstrip().endswith(": ready"):
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(60) or self.port is None or self.proc.poll() is not None:
            raise SystemExit("server did not start:\n" + "".join(self.log))

    def request(self, method, path, body=None, headers=None, timeout=60):
        """(status, headers dict, body bytes)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        conn.request(method, path, body=body, headers=self.auth if headers is None else headers)
        r = conn.getresponse()
        data = r.read()
        conn.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data

    def post(self, path, body, **kw):
        return self.request("POST", path, body, {"Content-Type": "application/json", **kw.pop("headers", self.auth)}, **kw)

    def stream(self, body, on_chunk=None):
        """Streams a chat completion; returns (content, finish_reason, events)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        conn.request("POST", "/v1/chat/completions", body=json.dumps({**body, "stream": True}),
                     headers={"Content-Type": "application/json", **self.auth})
        r = conn.getresponse()
        assert r.status == 200, (r.status, r.read())
        content, finish, events = "", None, []
        for line in r:
            line = line.decode().rstrip("\r\n")
            if not line.startswith("data: "):
                continue
            payload = line[6:]
            events.append(payload)
            if payload == "[DONE]":
                break
            chunk = json.loads(payload)
            for c in chunk["choices"]:
                content += c["delta"].get("content") or ""
                finish = c["finish_reason"] or finish
            if on_chunk and on_chunk(chunk) is False:
                break
        conn.close()
        return content, finish, events

    def metric(self, name):
        _, _, body = self.request("GET", "/metrics")
        m = re.search(rf"^{name} (\S+)$", body.decode(), re.M)
        return float(m.group(1)) if m else None

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            FAILURES.append("the server did not stop on SIGTERM")
        check(self.proc.returncode == 0, f"the server exited with {self.proc.returncode} on SIGTERM")


def chat(content, **kw):
    return {"messages": [{"role": "user", "content": content}], "temperature": 0, **kw}


def is_error_shape(status, data, want_status):
    try:
        e = json.loads(data)["error"]
        return status == want_status and isinstance(e["message"], str) and {"type", "param", "code"} <= e.keys()
    except (ValueError, KeyError, TypeError):
        return False


def suite_api():
    model = synth_model("tiny.gguf")
    s = Server(model, "-c", "1024", "--parallel", "1", "--max-queue", "0", "--max-body", "4096", key="sekrit")
    try:
        st, _, data = s.request("GET", "/health", headers={})
        check(st == 200 and json.loads(data) == {"status": "ok"}, f"/health: {st} {data}")
        for auth in ({}, {"Authorization": "Bearer sekrix"}, {"Authorization": "Bearer sekrit2"}, {"Authorization": "sekrit"}):
            st, h, data = s.post("/v1/chat/completions", chat("hi"), headers=auth)
            check(is_error_shape(st, data, 401), f"bad key {auth}: {st} {data}")
        st, _, data = s.post("/v1/chat/completions", chat("hi", max_tokens=3))
        check(st == 200, f"good key: {st} {data}")
        st, _, data = s.request("GET", "/nowhere")
        check(is_error_shape(st, data, 404), f"404: {st} {data}")
        st, _, data = s.post("/v1/chat/completions", "x" * 5000)
        check(is_error_shape(st, data, 413), f"413: {st} {data}")
        long_prompt = "a " * 1500
        st, _, data = s.post("/v1/chat/completions", chat(long_prompt))
        check(is_error_shape(st, data, 400) and "context holds 1024" in json.loads(data)["error"]["message"],
              f"prompt too long: {st} {data}")
        st, _, data = s.post("/v1/chat/completions", chat("hi", response_format={"type": "json_schema"}))
        check(is_error_shape(st, data, 400) and json.loads(data)["error"]["param"].startswith("response_format"),
              f"response_format: {st} {data}")
        st, _, data = s.post("/tokenize", {"content": "hello"})
        toks = json.loads(data)["tokens"]
        st2, _, data2 = s.post("/detokenize", {"tokens": toks})
        check(st == 200 and st2 == 200 and json.loads(data2)["content"] == "hello", f"tokenize round trip: {data} {data2}")

        # --max-queue 0: while one request runs, the next is a 429 with Retry-After. The
        # running one is a stream we leave after a few chunks: its job must stop (cancelled)
        # rather than run to the end of the context.
        seen = []
        first = threading.Event()
        leave = threading.Event()

        def long_stream():
            def on_chunk(_):
                seen.append(1)
                if len(seen) == 3:
                    first.set()
                    leave.wait(30)
                    return False
            s.stream(chat("go", max_tokens=100000, ignore_eos=True), on_chunk)

        t = threading.Thread(target=long_stream)
        t.start()
        check(first.wait(30), "the long stream did not start")
        st, h, data = s.post("/v1/chat/completions", chat("hi"))
        check(is_error_shape(st, data, 429) and h.get("retry-after"), f"queue full: {st} {h} {data}")
        leave.set()
        t.join()
        time.sleep(0.5)
        before = s.metric("fucina_generated_tokens_total")
        time.sleep(0.5)
        after = s.metric("fucina_generated_tokens_total")
        print(f"left stream: {before} tokens generated in all", flush=True)
        check(before == after and before < 500, f"the left stream kept generating: {before} -> {after} tokens")
        st, _, data = s.post("/v1/chat/completions", chat("hi", max_tokens=3))
        check(st == 200, f"after the cancelled stream: {st} {data}")
        st, _, data = s.request("GET", "/metrics")
        text = data.decode()
        for name in ("fucina_requests_total{status=\"429\"} 1", "fucina_generated_tokens_total", "fucina_queue_depth 0",
                     "fucina_tokens_per_second"):
            check(name in text, f"/metrics lacks {name}")
        log = "".join(s.log)
        check(re.search(r"POST /v1/chat/completions 429 0 tokens [0-9.]+ ms", log) is not None, "no log line for the 429")
        check(re.search(r"POST /v1/chat/completions 200 3 tokens", log) is not None, "no log line with tokens")
    finally:
        s.stop()

    # --timeout: a request that runs longer is a 503 with Retry-After.
    s = Server(model, "-c", "4096", "--timeout", "0.3")
    try:
        st, h, data = s.post("/v1/chat/completions", chat("hi", max_tokens=100000, ignore_eos=True))
        check(is_error_shape(st, data, 503) and json.loads(data)["error"]["code"] == "timeout" and h.get("retry-after"),
              f"timeout: {st} {data}")
        st, _, data = s.post("/v1/chat/completions", chat("hi", max_tokens=2))
        check(st == 200, f"after a timeout: {st} {data}")
    finally:
        s.stop()


def concurrent_streams(s, prompts):
    """Streams every prompt at once (96 tokens each, temperature 0); each stream's (text,
    chunks, events), checked to have finished."""
    results = [None] * len(prompts)

    def one(i):
        try:
            results[i] = s.stream(chat(prompts[i], max_tokens=96, ignore_eos=True))
        except Exception as e:  # recorded, reported below
            results[i] = ("error", repr(e), [])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(240)
    for i, r in enumerate(results):
        check(r is not None and r[2] and r[2][-1] == "[DONE]", f"stream {i} did not finish: {r}")
    return results


def suite_concurrency():
    """32 streams at once over 8 slots: each prints its solo run's text, and they really ran
    together (generated tokens per engine step); then streams left mid-way: their sequences
    end and every KV block is free again."""
    model = q8_model("tiny-q8.gguf")
    for flags, want in ((["--spec", "maybe"], "--spec must be lookup or off, not 'maybe'"),
                        (["--draft-max", "2", "--draft-min", "3"], "--draft-max 2 must be at least --draft-min 3"),
                        (["--draft-min", "0"], "--draft-min must be at least 1, got 0")):
        r = subprocess.run([FUCINA, "serve", model, "--port", "0", *flags], capture_output=True, text=True, timeout=30)
        check(r.returncode == 2 and r.stderr == f"fucina serve: {want}\n", f"serve {flags}: {r.returncode} {r.stderr!r}")
    s = Server(model, "-c", "1024", "--parallel", "8", "--max-queue", "32")
    try:
        prompts = [f"request {i}: " + "xyz"[i % 3] * (i % 7) for i in range(32)]
        # Long enough that the streams overlap however the client threads start.
        solo = [s.stream(chat(p, max_tokens=96, ignore_eos=True))[0] for p in prompts]
        tokens0, steps0 = s.metric("fucina_generated_tokens_total"), s.metric("fucina_steps_total")
        results = concurrent_streams(s, prompts)
        for i, r in enumerate(results):
            check(r is not None and r[0] == solo[i], f"stream {i}: {r and r[0]!r} != solo {solo[i]!r}")
        check(len(set(solo)) > 1, "the prompts all gave the same text: the test would not notice a mix-up")
        tokens = s.metric("fucina_generated_tokens_total") - tokens0
        steps = s.metric("fucina_steps_total") - steps0
        drafted, accepted = s.metric("fucina_drafted_tokens_total"), s.metric("fucina_accepted_tokens_total")
        print(f"concurrent: {tokens:.0f} tokens in {steps:.0f} steps, {accepted:.0f} of {drafted:.0f} drafted tokens accepted",
              flush=True)
        check(tokens == 32 * 96 and steps > 0 and tokens / steps >= 3,
              f"{tokens} tokens in {steps} steps: the streams did not run together")
        check(accepted > 0, "no drafted token was accepted: speculation (on by default) was not exercised")

        # Speculation off (Note [Speculative batches]): the same bytes, alone and concurrently
        # (after the same solo runs: which prefixes are kept and forked is the same), nothing drafted.
        off = Server(model, "-c", "1024", "--parallel", "8", "--max-queue", "32", "--spec", "off")
        try:
            for i, p in enumerate(prompts):
                text = off.stream(chat(p, max_tokens=96, ignore_eos=True))[0]
                check(text == solo[i], f"--spec off solo {i}: {text!r} != {solo[i]!r}")
            for i, r in enumerate(concurrent_streams(off, prompts)):
                check(r is not None and r[0] == solo[i], f"--spec off stream {i}: {r and r[0]!r} != {solo[i]!r}")
            check(off.metric("fucina_drafted_tokens_total") == 0, "--spec off drafted tokens")
        finally:
            off.stop()

        # Streams left after a few chunks: each sequence is cancelled, its KV blocks freed. (The
        # engine keeps the KV of its last finished sequences for reuse: Note [Kept prefixes],
        # so "free" is compared with before the streams, not with the total.)
        total, before = s.metric("fucina_kv_blocks_total"), s.metric("fucina_kv_blocks_free")
        check(total and s.metric("fucina_running") == 0 and before > 0, f"{before} of {total} KV blocks free, nothing running")
        seen, during = [0] * 6, []

        def leave(i):
            def on_chunk(_):
                seen[i] += 1
                if seen[i] == 5:
                    during.append((s.metric("fucina_running"), s.metric("fucina_kv_blocks_free")))
                    return False
            s.stream(chat(prompts[i], max_tokens=100000, ignore_eos=True), on_chunk)

        threads = [threading.Thread(target=leave, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        check(len(during) == 6 and max(r for r, _ in during) >= 1 and min(f for _, f in during) < before,
              f"the long streams were not running or held no blocks: {during}")
        for _ in range(100):  # the engine notices at its next step; bounded wait, no timing asserted
            if s.metric("fucina_running") == 0 and s.metric("fucina_kv_blocks_free") == before:
                break
            time.sleep(0.05)
        check(s.metric("fucina_running") == 0, "left streams still running")
        after = s.metric("fucina_kv_blocks_free")
        check(after == before, f"KV blocks not freed: {after} free after the streams left, {before} before")
        generated = s.metric("fucina_generated_tokens_total")
        check(generated - tokens0 - tokens < 6 * 1000, f"the left streams generated {generated - tokens0 - tokens} tokens")
        time.sleep(0.3)
        check(s.metric("fucina_generated_tokens_total") == generated, "tokens still being generated after the streams left")
        st, _, data = s.post("/v1/chat/completions", chat(prompts[0], max_tokens=96, ignore_eos=True))
        check(st == 200 and json.loads(data)["choices"][0]["message"]["content"] == solo[0], f"after the left streams: {st} {data[:200]}")
    finally:
        s.stop()


def raw_exchange(port, data, half=False, timeout=10.0):
    """Sends raw bytes; returns the status (0: no status before the connection closed or
    `timeout` passed). half: the client closes its side after sending (it gave up)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as c:
        c.sendall(data)
        if half:
            c.shutdown(socket.SHUT_WR)
        buf = b""
        try:
            while b"\r\n" not in buf:
                got = c.recv(4096)
                if not got:
                    break
                buf += got
        except (ConnectionResetError, socket.timeout):
            return 0
        m = re.match(rb"HTTP/1\.[01] (\d{3})", buf)
        return int(m.group(1)) if m else 0


def malformed_bodies(rng):
    good = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    good_text = json.dumps(good)
    huge = ["1e999", "-1e999", "99999999999999999999999999", "18446744073709551616", "-9223372036854775809", "1e308"]
    wrong = {"messages": ["x", 1, None, {}, [{"role": 1}], [{"role": "user", "content": {}}],
                          [{"role": "user", "content": [{"type": "image_url"}]}], [{"content": "x"}]],
             "max_tokens": ["10", 1.5, -1, 0, True, [], {}], "temperature": ["hot", -1, 1e9, [], {}],
             "top_p": [0, 2, "x"], "top_k": [-1, 0.5, "x"], "min_p": [-0.1, 2, "x"], "n": [0, 17, "2"],
             "seed": ["x", 1.5], "stop": [1, [1], {"a": 1}, [""]], "stream": ["yes", 1],
             "stream_options": ["x", {"include_usage": "y"}], "logprobs": ["x", 3], "top_logprobs": [21, -1],
             "presence_penalty": [3, "x"], "frequency_penalty": [-3, []], "tools": ["x", [1], [{"type": "function"}]],
             "tool_choice": [1, "sometimes"], "response_format": ["json", {"type": "yaml"}, {"type": "json_schema"},
                                 {"type": "json_schema", "json_schema": {"schema": []}}],
             "model": [1, []]}
    fields = list(wrong)
    while True:
        kind = rng.randrange(7)
        if kind == 0:  # truncated JSON
            yield good_text[: rng.randrange(len(good_text) - 1)].encode()
        elif kind == 1:  # a wrong type or value
            f = rng.choice(fields)
            yield json.dumps({**good, f: rng.choice(wrong[f])}).encode()
        elif kind == 2:  # a huge number
            yield good_text.replace('"max_tokens": 2', '"max_tokens": ' + rng.choice(huge)).encode()
        elif kind == 3:  # invalid UTF-8 inside a string
            bad = bytes(rng.choice([0x80, 0xC0, 0xC1, 0xF5, 0xFE, 0xFF]) for _ in range(rng.randrange(1, 4)))
            yield good_text.encode().replace(b"hi", b"h" + bad)
        elif kind == 4:  # a missing field
            yield rng.choice([b"{}", b'{"max_tokens": 2}', b'{"messages": [{"role": "user"}]}', b"null", b"[]"])
        elif kind == 5:  # random bytes
            yield bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
        else:  # deep nesting
            d = rng.randrange(1, 5000)
            yield b'{"messages": ' + b"[" * d + b"]" * d + b"}"


def suite_malformed():
    s = Server(synth_model("tiny.gguf"), "-c", "512", "--max-body", "65536")
    rng = random.Random(21)
    counts = {}
    try:
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        bodies = malformed_bodies(rng)
        n = 0
        for _ in range(9000):  # well-framed HTTP, bad bodies, on one kept-alive connection
            path = rng.choice(["/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize"])
            body = next(bodies)
            conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
            counts[r.status] = counts.get(r.status, 0) + 1
            # /v1/completions needs "prompt", so every body above is a 4xx there too.
            if not (400 <= r.status < 500 and is_error_shape(r.status, data, r.status)):
                check(False, f"{path} {body[:80]!r}: {r.status} {data[:200]!r}")
                break
            n += 1
        conn.close()
        # Whole requests the HTTP layer refuses, answered at once.
        whole = [
            lambda: bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))) + b"\r\n\r\n",  # random bytes
            lambda: b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n",
            lambda: b"POST /tokenize HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            lambda: b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 5\r\n\r\n\xff\xfe{[\x00",
        ]
        # Half-sent requests (the body or the headers never finish).
        partial = [
            lambda: b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{\"messages\":",
            lambda: b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Le",
            lambda: b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
            lambda: b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
        ]
        for i in range(1200):
            if i % 2 == 0:
                st = raw_exchange(s.port, whole[(i // 2) % len(whole)]())
                ok = 400 <= st < 500
            elif i % 60 == 1:  # the client waits a little, then leaves without closing its side first
                st = raw_exchange(s.port, partial[(i // 2) % len(partial)](), timeout=0.2)
                ok = st == 0 or 400 <= st < 500
            else:  # the client closes its side: the server must drop the request, not answer 2xx or hang
                st = raw_exchange(s.port, partial[(i // 2) % len(partial)](), half=True)
                ok = st == 0 or 400 <= st < 500
            counts[st] = counts.get(st, 0) + 1
            if not ok:
                check(False, f"raw request {i}: status {st}")
                break
            n += 1
        check(n >= 10000, f"only {n} malformed requests were answered as they should")
        check(s.proc.poll() is None, "the server died")
        st, _, data = s.post("/v1/chat/completions", chat("hi", max_tokens=4))
        check(st == 200 and json.loads(data)["usage"]["completion_tokens"] == 4, f"valid request afterwards: {st} {data}")
        print(f"malformed: {n} requests, statuses {dict(sorted(counts.items()))}", flush=True)
    finally:
        s.stop()


def suite_tools():
    """tool_choice "required" / a named function: the reply is a call, its arguments fit the schema."""
    s = Server(synth_model("tiny.gguf"), "-c", "1024")
    try:
        weather = {"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                             "days": {"type": "integer", "minimum": 1, "maximum": 7}},
            "required": ["city", "days"], "additionalProperties": False}}}
        clock = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
        for seed in range(3):  # a random model, constrained: always a well-formed call
            st, _, data = s.post("/v1/chat/completions", chat("weather?", temperature=1, seed=seed, max_tokens=400,
                                                               tools=[weather, clock], tool_choice="required"))
            choice = json.loads(data)["choices"][0] if st == 200 else {}
            calls = choice.get("message", {}).get("tool_calls") or []
            check(choice.get("finish_reason") == "tool_calls" and len(calls) == 1, f"required tool call {seed}: {st} {data}")
            if calls and calls[0]["function"]["name"] == "get_weather":
                a = json.loads(calls[0]["function"]["arguments"])
                check(set(a) == {"city", "days"} and isinstance(a["city"], str) and len(a["city"]) <= 12
                      and 1 <= a["days"] <= 7, f"arguments off the schema: {a}")
        st, _, data = s.post("/v1/chat/completions", chat("time?", temperature=1, seed=4, max_tokens=400, tools=[weather, clock],
                                                           tool_choice={"type": "function", "function": {"name": "get_time"}}))
        calls = json.loads(data)["choices"][0]["message"].get("tool_calls") if st == 200 else None
        check(calls and calls[0]["function"]["name"] == "get_time", f"named tool_choice: {st} {data}")
    finally:
        s.stop()


def suite_lora():
    """--lora applies an adapter as `fucina run --lora` does (a random one: B is not zero)."""
    base = synth_model("lora-base.gguf")
    adapter = os.path.join(WORK, "adapter.gguf")
    subprocess.run([FUCINA, "synth", adapter, "--lora-for", base, "--lora-targets", "q,k,v,o,gate,up,down", "--seed", "5"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    prompt = "The adapter changes"

    def run(*flags):
        return subprocess.run([FUCINA, "run", base, "-p", prompt, "--temp", "0", "-n", "24", "-t", "1", *flags],
                              check=True, capture_output=True).stdout.decode("utf-8", "replace")

    want, plain = run("--lora", adapter), run()
    check(want != plain, "the adapter changed nothing: the test would not notice it being ignored")
    s = Server(base, "--lora", adapter, "-c", "256")
    try:
        st, _, data = s.post("/v1/completions", {"prompt": prompt, "max_tokens": 24, "temperature": 0})
        got = json.loads(data)["choices"][0]["text"] if st == 200 else None
        check(got == want, f"serve --lora {got!r} != run --lora {want!r}")
    finally:
        s.stop()


def main():
    {"api": suite_api, "tools": suite_tools, "lora": suite_lora, "concurrency": suite_concurrency, "malformed": suite_malformed}[SUITE]()
    if FAILURES:
        print(f"{len(FAILURES)} failure(s)")
        return 1
    print(f"{SUITE}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
