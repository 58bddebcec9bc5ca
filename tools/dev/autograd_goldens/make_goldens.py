#!/usr/bin/python3
"""PyTorch goldens for tests/autograd/torch_parity_test.cpp.

Writes tests/data/autograd/{mlp,block}.json: the inputs and parameters (float32, from a
seeded numpy generator), the loss, and the gradient of every parameter and input, all
computed by PyTorch in float32. Run with Debian's python3-torch:

    OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 tools/dev/autograd_goldens/make_goldens.py
"""
import json
import os

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "data", "autograd")
torch.set_num_threads(1)


def arr(t):
    a = t.detach().cpu().numpy().astype(np.float32)
    return {"shape": list(a.shape), "data": [float(v) for v in a.reshape(-1)]}


def dump(name, tensors, loss, grads, extra):
    doc = {"tensors": {k: arr(v) for k, v in tensors.items()},
           "loss": float(loss), "grads": {k: arr(v) for k, v in grads.items()}}
    doc.update(extra)
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))


def param(rng, *shape, scale=1.0):
    return torch.tensor(rng.standard_normal(shape).astype(np.float32) * np.float32(scale), requires_grad=True)


def mlp():
    rng = np.random.default_rng(1)
    x = param(rng, 8, 4)
    w1, b1 = param(rng, 16, 4, scale=0.5), param(rng, 16, scale=0.1)  # weights stored [out, in]
    w2, b2 = param(rng, 16, 16, scale=0.25), param(rng, 16, scale=0.1)
    w3 = param(rng, 3, 16, scale=0.25)
    target = torch.tensor([0, 2, 1, 1, 0, 2, -100, 1])
    h = torch.tanh(x @ w1.T + b1)
    h = torch.nn.functional.silu(h @ w2.T + b2)
    logits = h @ w3.T
    loss = torch.nn.functional.cross_entropy(logits, target, ignore_index=-100)
    loss.backward()
    ts = dict(x=x, w1=w1, b1=b1, w2=w2, b2=b2, w3=w3)
    dump("mlp", ts, loss.item(), {k: v.grad for k, v in ts.items()}, {"target": target.tolist()})


def rope(x, base):  # x: [seq, heads, hd]; Llama pairs (2i, 2i+1); angles as fucina forms them
    seq, _, hd = x.shape
    scale = np.float32(base) ** np.float32(-2.0 / hd)
    cos = np.zeros((seq, hd // 2), np.float32)
    sin = np.zeros((seq, hd // 2), np.float32)
    for p in range(seq):
        theta = np.float32(p)
        for i in range(hd // 2):
            cos[p, i], sin[p, i] = np.cos(theta), np.sin(theta)
            theta = np.float32(theta * scale)
    c = torch.tensor(cos)[:, None, :]
    s = torch.tensor(sin)[:, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1)
    return out.reshape(x.shape)


def rms(x, g, eps=1e-5):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * g


def block():
    rng = np.random.default_rng(2)
    seq, embd, heads, kv, hd, ffn, vocab = 6, 16, 4, 2, 4, 32, 10
    x = param(rng, seq, embd)
    g1 = torch.tensor(1 + 0.1 * rng.standard_normal(embd).astype(np.float32), requires_grad=True)
    wq = param(rng, heads * hd, embd, scale=0.25)
    wk = param(rng, kv * hd, embd, scale=0.25)
    wv = param(rng, kv * hd, embd, scale=0.25)
    wo = param(rng, embd, heads * hd, scale=0.25)
    g2 = torch.tensor(1 + 0.1 * rng.standard_normal(embd).astype(np.float32), requires_grad=True)
    wg = param(rng, ffn, embd, scale=0.25)
    wu = param(rng, ffn, embd, scale=0.25)
    wd = param(rng, embd, ffn, scale=0.2)
    wout = param(rng, vocab, embd, scale=0.25)
    target = torch.tensor([3, 1, 4, 1, 5, 9])

    h = rms(x, g1)
    q = rope((h @ wq.T).reshape(seq, heads, hd), 10000.0)
    k = rope((h @ wk.T).reshape(seq, kv, hd), 10000.0)
    v = (h @ wv.T).reshape(seq, kv, hd)
    grp = heads // kv
    k = k.repeat_interleave(grp, dim=1)  # head h reads kv head h // grp
    v = v.repeat_interleave(grp, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q, k) / np.float32(np.sqrt(hd))
    mask = torch.triu(torch.full((seq, seq), float("-inf")), diagonal=1)
    probs = torch.softmax(scores + mask, dim=-1)
    attn = torch.einsum("hqk,khd->qhd", probs, v).reshape(seq, heads * hd) @ wo.T
    x2 = x + attn
    h2 = rms(x2, g2)
    y = x2 + (torch.nn.functional.silu(h2 @ wg.T) * (h2 @ wu.T)) @ wd.T
    loss = torch.nn.functional.cross_entropy(y @ wout.T, target)
    loss.backward()
    ts = dict(x=x, g1=g1, wq=wq, wk=wk, wv=wv, wo=wo, g2=g2, wg=wg, wu=wu, wd=wd, wout=wout)
    dump("block", ts, loss.item(), {k: t.grad for k, t in ts.items()}, {"target": target.tolist()})


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    mlp()
    block()
