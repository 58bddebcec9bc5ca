#!/usr/bin/python3
"""PyTorch twin of bench/bench_train.cpp: ms per training step (forward + backward).

    OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 bench/torch_train_step.py
"""
import time

import torch
import torch.nn.functional as F


def timeit(fn, threads, reps=20):
    torch.set_num_threads(threads)
    for _ in range(3):
        fn()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps * 1e3


def mlp():
    batch, width = 256, 512
    x = torch.randn(batch, width)
    ws = [(torch.randn(width, width) / width ** 0.5).requires_grad_() for _ in range(4)]
    bs = [torch.zeros(width, requires_grad=True) for _ in range(4)]
    target = torch.zeros(batch, dtype=torch.long)

    def step():
        h = x
        for l in range(3):
            h = F.relu(h @ ws[l].T + bs[l])
        loss = F.cross_entropy(h @ ws[3].T + bs[3], target)
        loss.backward()
        for p in ws + bs:
            p.grad = None
    return step


def rope(x, pos, base=1e4):
    d = x.shape[-1]
    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
    ang = pos[:, None] * inv[None, :]
    c, s = ang.cos()[:, None, :], ang.sin()[:, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], -1).reshape(x.shape)


def block():
    seq, embd, hd, heads, kv, ffn = 128, 256, 32, 8, 4, 768
    s = embd ** -0.5
    x = torch.randn(seq, embd, requires_grad=True)
    g1, g2 = torch.ones(embd, requires_grad=True), torch.ones(embd, requires_grad=True)
    wq = (torch.randn(heads * hd, embd) * s).requires_grad_()
    wk = (torch.randn(kv * hd, embd) * s).requires_grad_()
    wv = (torch.randn(kv * hd, embd) * s).requires_grad_()
    wo = (torch.randn(embd, heads * hd) * s).requires_grad_()
    wg = (torch.randn(ffn, embd) * s).requires_grad_()
    wu = (torch.randn(ffn, embd) * s).requires_grad_()
    wd = (torch.randn(embd, ffn) * ffn ** -0.5).requires_grad_()
    pos = torch.arange(seq, dtype=torch.float32)
    mask = torch.triu(torch.full((seq, seq), float("-inf")), 1)
    params = [x, g1, g2, wq, wk, wv, wo, wg, wu, wd]

    def rms(t, g):
        return t * torch.rsqrt((t * t).mean(-1, keepdim=True) + 1e-5) * g

    def step():
        h = rms(x, g1)
        q = rope((h @ wq.T).view(seq, heads, hd), pos)
        k = rope((h @ wk.T).view(seq, kv, hd), pos).repeat_interleave(heads // kv, 1)
        v = (h @ wv.T).view(seq, kv, hd).repeat_interleave(heads // kv, 1)
        p = torch.softmax(torch.einsum("qhd,khd->hqk", q, k) / hd ** 0.5 + mask, -1)
        x2 = x + torch.einsum("hqk,khd->qhd", p, v).reshape(seq, heads * hd) @ wo.T
        h2 = rms(x2, g2)
        y = x2 + (F.silu(h2 @ wg.T) * (h2 @ wu.T)) @ wd.T
        (y * y).sum().backward()
        for t in params:
            t.grad = None
    return step


if __name__ == "__main__":
    for name, make in (("mlp_train_step", mlp), ("transformer_block_train_step", block)):
        for threads in (1, 2):
            print(f"{name} threads={threads}: {timeit(make(), threads):.2f} ms")
