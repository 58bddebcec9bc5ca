#!/usr/bin/python3
"""PyTorch 1.13 CPU training step of a llama/qwen3-shaped LM, the peer of `fucina finetune`
in bench/compare_finetune.sh (same shapes as ../shared/peers/torch_llm_anchor.py, which
fixes V=4096; here every dimension is a flag so both sides train the same model).

usage: OPENBLAS_CORETYPE=SkylakeX torch_llm_train_step.py --vocab V --embd D --layers L --heads H
       --kv-heads KV --head-dim HD --ffn FF [--lora R] [--batch B] [--ctx T] [--threads N] [--reps K]
Prints one line: ms/step and tokens/s (median of K steps after 2 warm-up steps), AdamW."""
import argparse
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w


def rope(x, base=1e6):
    t, hd = x.shape[-2], x.shape[-1]
    inv = base ** (-torch.arange(0, hd, 2).float() / hd)
    a = torch.arange(t).float()[:, None] * inv[None]
    c, s = a.cos(), a.sin()
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], -1)


class Linear(nn.Module):
    """x Wᵀ with an optional LoRA (W frozen then, B starts at zero, scale 2 = alpha 16 / r 8)."""

    def __init__(self, n_in, n_out, r=0):
        super().__init__()
        self.w = nn.Parameter(torch.randn(n_out, n_in) / math.sqrt(n_in), requires_grad=r == 0)
        self.r = r
        if r:
            self.a = nn.Parameter(torch.randn(r, n_in) / math.sqrt(n_in))
            self.b = nn.Parameter(torch.zeros(n_out, r))

    def forward(self, x):
        y = x @ self.w.t()
        return y + (x @ self.a.t()) @ self.b.t() * 2.0 if self.r else y


class Block(nn.Module):
    def __init__(self, d, h, kv, hd, ff, r):
        super().__init__()
        self.h, self.kv, self.hd = h, kv, hd
        self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
        self.q, self.k, self.v = Linear(d, h * hd, r), Linear(d, kv * hd, r), Linear(d, kv * hd, r)
        self.o = Linear(h * hd, d, r)
        self.g, self.u, self.dn = Linear(d, ff), Linear(d, ff), Linear(ff, d)
        if r:
            for p in [self.g.w, self.u.w, self.dn.w, self.n1.w, self.n2.w]:
                p.requires_grad_(False)

    def forward(self, x):
        b, t, _ = x.shape
        y = self.n1(x)
        q = rope(self.q(y).view(b, t, self.h, self.hd).transpose(1, 2))
        k = rope(self.k(y).view(b, t, self.kv, self.hd).transpose(1, 2))
        v = self.v(y).view(b, t, self.kv, self.hd).transpose(1, 2)
        rep = self.h // self.kv
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)
        att = att.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf")).softmax(-1)
        x = x + self.o((att @ v).transpose(1, 2).reshape(b, t, -1))
        y = self.n2(x)
        return x + self.dn(F.silu(self.g(y)) * self.u(y))


class LM(nn.Module):
    def __init__(self, vocab, d, layers, h, kv, hd, ff, r):
        super().__init__()
        self.e = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, h, kv, hd, ff, r) for _ in range(layers))
        self.n = RMSNorm(d)
        if r:
            self.e.weight.requires_grad_(False)
            self.n.w.requires_grad_(False)

    def forward(self, t):
        x = self.e(t)
        for blk in self.blocks:
            x = blk(x)
        return self.n(x) @ self.e.weight.t()  # tied output


def main():
    ap = argparse.ArgumentParser()
    for name, default in [("vocab", 32000), ("embd", 256), ("layers", 6), ("heads", 8), ("kv-heads", 4), ("head-dim", 32),
                          ("ffn", 768), ("lora", 0), ("batch", 8), ("ctx", 256), ("threads", 2), ("reps", 5)]:
        ap.add_argument("--" + name, type=int, default=default)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    m = LM(a.vocab, a.embd, a.layers, a.heads, a.kv_heads, a.head_dim, a.ffn, a.lora)
    opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-4, weight_decay=0.0)
    tok = torch.randint(0, a.vocab, (a.batch, a.ctx + 1))

    def step():
        loss = F.cross_entropy(m(tok[:, :-1]).reshape(-1, a.vocab), tok[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(2):
        step()
    times = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    dt = statistics.median(times)
    n = sum(p.numel() for p in m.parameters())
    tr = sum(p.numel() for p in m.parameters() if p.requires_grad)
    print(f"torch {torch.__version__}: {n / 1e6:.1f}M params ({tr / 1e6:.2f}M trainable), batch {a.batch}x{a.ctx}, "
          f"{a.threads} threads: {dt * 1e3:.0f} ms/step, {a.batch * a.ctx / dt:.0f} tokens/s")


if __name__ == "__main__":
    main()
