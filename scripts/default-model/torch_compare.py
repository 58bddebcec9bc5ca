#!/usr/bin/python3
"""Tests the training stack: the default model's architecture trained by PyTorch 1.13 from the
same initial weights, on the same batches, with the same schedule as `fucina finetune`
(docs/DEFAULT-MODEL.md). Prints both validation losses; PyTorch may be at most 2% better.

usage: OPENBLAS_CORETYPE=SkylakeX torch_compare.py FUCINA WORK_DIR STEPS [THREADS]
WORK_DIR holds init.gguf, vocab.gguf, train.txt, val.txt (scripts/train-default-model.sh
makes them). Both sides run STEPS steps of the training recipe in train-default-model.sh
(AdamW, warmup + cosine over STEPS steps, global-norm clipping, windows of 256 tokens, 16 per
step, in the order of Note [Finetune data order]).
"""
import json
import math
import os
import re
import subprocess
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from gguf_read import read_gguf  # noqa: E402

CTX, BATCH, LR, WD, WARMUP, CLIP, SEED = 256, 16, 2e-3, 0.1, 100, 1.0, 1
MASK = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def bits(seed, i):  # core/rng.hpp
    return splitmix64(splitmix64(seed) ^ ((i * 0xD1B54A32D192ED03) & MASK))


def epoch_order(n, seed, epoch):  # src/train/finetune.cpp
    p = list(range(n))
    s = bits(seed, epoch + 0x5EED)
    for i in range(n - 1, 0, -1):
        j = bits(s, i) % (i + 1)
        p[i], p[j] = p[j], p[i]
    return p


def read_f32_tensors(path):
    """The metadata and the f32 tensors of a GGUF file (scripts/gguf_read.py)."""
    data = open(path, "rb").read()
    kv, infos = read_gguf(data)
    tensors = {}
    for t in infos:
        assert t.type == 0, f"{t.name}: only f32 tensors are read"
        n = math.prod(t.ne)
        tensors[t.name] = torch.frombuffer(bytearray(data[t.offset: t.offset + 4 * n]), dtype=torch.float32).reshape(
            list(reversed(t.ne))).clone()
    return kv, tensors


def windows(fucina, vocab, text_file):
    out = subprocess.run([fucina, "tokenize", vocab, "-f", text_file, "--no-parse-special"], check=True,
                         capture_output=True, text=True).stdout
    ids = json.loads(out.strip().splitlines()[-1])
    return [ids[i: i + CTX + 1] for i in range(0, len(ids) - 1, CTX) if len(ids[i: i + CTX + 1]) > 1]


class Llama(torch.nn.Module):
    def __init__(self, kv, t):
        super().__init__()
        a = kv["general.architecture"]
        self.n_head, self.n_kv = kv[f"{a}.attention.head_count"], kv[f"{a}.attention.head_count_kv"]
        self.eps = kv[f"{a}.attention.layer_norm_rms_epsilon"]
        self.base = kv.get(f"{a}.rope.freq_base", 10000.0)
        self.p = torch.nn.ParameterDict({k.replace(".", "_"): torch.nn.Parameter(v) for k, v in t.items()})
        self.n_layer = kv[f"{a}.block_count"]

    def w(self, name):
        return self.p[name.replace(".", "_")]

    def rms(self, x, w):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps) * w

    def rope(self, x):  # llama: adjacent pairs
        n, h, d = x.shape
        inv = torch.pow(torch.tensor(self.base, dtype=torch.float64), -2.0 * torch.arange(d // 2, dtype=torch.float64) / d)
        a = torch.arange(n, dtype=torch.float64)[:, None] * inv[None, :]
        c, s = torch.cos(a).float()[:, None, :], torch.sin(a).float()[:, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], -1).reshape(n, h, d)

    def forward(self, ids):
        emb = self.w("token_embd.weight")
        x = emb[ids]
        n = ids.shape[0]
        for l in range(self.n_layer):
            b = f"blk.{l}."
            h = self.rms(x, self.w(b + "attn_norm.weight"))
            q = (h @ self.w(b + "attn_q.weight").t()).reshape(n, self.n_head, -1)
            k = (h @ self.w(b + "attn_k.weight").t()).reshape(n, self.n_kv, -1)
            v = (h @ self.w(b + "attn_v.weight").t()).reshape(n, self.n_kv, -1)
            q, k = self.rope(q), self.rope(k)
            g = self.n_head // self.n_kv
            k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
            att = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(q.shape[-1])
            att = att.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf")).softmax(-1)
            x = x + torch.einsum("hqk,khd->qhd", att, v).reshape(n, -1) @ self.w(b + "attn_output.weight").t()
            h = self.rms(x, self.w(b + "ffn_norm.weight"))
            ff = F.silu(h @ self.w(b + "ffn_gate.weight").t()) * (h @ self.w(b + "ffn_up.weight").t())
            x = x + ff @ self.w(b + "ffn_down.weight").t()
        return self.rms(x, self.w("output_norm.weight")) @ emb.t()


def loss_of(model, batch):
    total, count = 0.0, 0
    for win in batch:
        t = torch.tensor(win)
        total = total + F.cross_entropy(model(t[:-1]), t[1:], reduction="sum")
        count += len(win) - 1
    return total / count


def main():
    fucina, work, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    threads = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    torch.set_num_threads(threads)
    vocab = os.path.join(work, "vocab.gguf")
    train, val = windows(fucina, vocab, os.path.join(work, "train.txt")), windows(fucina, vocab, os.path.join(work, "val.txt"))

    # fucina: the same recipe for `steps` steps.
    out = os.path.join(work, f"compare-{steps}.gguf")
    log = subprocess.run([fucina, "finetune", os.path.join(work, "init.gguf"), "--data", os.path.join(work, "train.txt"),
                          "--val", os.path.join(work, "val.txt"), "--ctx", str(CTX), "--batch", str(BATCH), "--steps",
                          str(steps), "--lr", str(LR), "--weight-decay", str(WD), "--warmup", str(min(WARMUP, steps)),
                          "--schedule", "cosine", "--grad-clip", str(CLIP), "--seed", str(SEED), "-t", str(threads),
                          "-o", out], check=True, capture_output=True, text=True).stderr
    fucina_val = float(re.findall(r"val loss ([0-9.]+)", log)[-1])
    os.remove(out)

    kv, t = read_f32_tensors(os.path.join(work, "init.gguf"))
    model = Llama(kv, t)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=WD)
    warm = min(WARMUP, steps)

    def factor(s):
        if s < warm:
            return (s + 1) / warm
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (s - warm) / max(1, steps - warm))))

    per_epoch = (len(train) + BATCH - 1) // BATCH
    for s in range(steps):
        order = epoch_order(len(train), SEED, s // per_epoch)
        pos = s % per_epoch
        batch = [train[i] for i in order[pos * BATCH: (pos + 1) * BATCH]]
        for g in opt.param_groups:
            g["lr"] = LR * factor(s)
        opt.zero_grad()
        loss = loss_of(model, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        if s % 20 == 0 or s + 1 == steps:
            print(f"torch step {s + 1}/{steps} loss {float(loss):.4f}", flush=True)
    with torch.no_grad():
        total, count = 0.0, 0
        for i in range(0, len(val), BATCH):
            chunk = val[i: i + BATCH]
            n = sum(len(w) - 1 for w in chunk)
            total += float(loss_of(model, chunk)) * n
            count += n
    torch_val = total / count
    print(f"validation loss after {steps} steps: fucina {fucina_val:.4f}, PyTorch {torch_val:.4f} "
          f"(PyTorch {100 * (fucina_val - torch_val) / fucina_val:+.2f}% better; the bar is 2%)")


if __name__ == "__main__":
    main()
