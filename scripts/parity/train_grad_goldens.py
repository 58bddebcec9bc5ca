#!/usr/bin/env python3
"""Training-gradient goldens with PyTorch (tests/data/train/grad_cases.json says what).

usage: train_grad_goldens.py FUCINA_BINARY [--only NAME]

For each case: `fucina synth` (+ `fucina quantize`) makes the model; gguf-py (from the
llama.cpp peer's source tree) reads and dequantizes its tensors; a PyTorch float32 forward
written from llama.cpp's graphs (RMSNorm, ggml RoPE, GQA causal attention, SwiGLU, the
qwen3moe router) computes the loss, and backward every gradient. The forward emulates the
activation rounding fucina (as llama.cpp) does before a stored-weight product -- f16 for f16
weights, Q8_0 blocks for Q8_0, Q8_K blocks for the k-quants -- as straight-through steps, the
gradient fucina's backward uses. Written: tests/data/train/<name>.json (loss, tensor index)
and <name>.bin (float32 gradients).
"""
import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

PEER = os.path.expanduser("~/.cache/fucina-peers/llama.cpp/gguf-py")
sys.path.insert(0, PEER)
import gguf  # noqa: E402
from gguf import GGMLQuantizationType as Q  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data", "train")
KQUANTS = {Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K}
torch.set_num_threads(2)


def synth_flags(spec):
    f = ["--arch", spec["arch"], "--hidden", str(spec["embd"]), "--layers", str(spec["layers"]),
         "--heads", str(spec["heads"]), "--kv-heads", str(spec["kv_heads"]), "--dtype", spec["dtype"],
         "--seed", str(spec["seed"])]
    for key, flag in [("head_dim", "--head-dim"), ("ff", "--ffn"), ("experts", "--experts"),
                      ("experts_used", "--experts-used"), ("expert_ffn", "--expert-ffn")]:
        if key in spec:
            f += [flag, str(spec[key])]
    if spec.get("tied"):
        f.append("--tied")
    return f


def q8_0_round(x):
    """x as ggml's quantize_row_q8_0 (x86) then dequantized: blocks of 32, d = amax/127 (f16)."""
    b = x.reshape(-1, 32)
    amax = b.abs().amax(dim=1, keepdim=True)
    idv = torch.where(amax > 0, 127.0 / amax, torch.zeros_like(amax))
    q = torch.round(b * idv)
    d = (amax / 127.0).half().float()
    return (q * d).reshape(x.shape)


def q8_k_round(x):
    """x as ggml's quantize_row_q8_K_ref then dequantized: blocks of 256, iscale = -127/max."""
    b = x.reshape(-1, 256)
    idx = b.abs().argmax(dim=1, keepdim=True)
    mx = torch.gather(b, 1, idx)
    iscale = torch.where(mx != 0, -127.0 / mx, torch.zeros_like(mx))
    q = torch.clamp(torch.round(iscale * b), max=127.0)
    d = torch.where(mx != 0, 1.0 / iscale, torch.zeros_like(mx))
    return (q * d).reshape(x.shape)


def ste(x, rounded):
    return x + (rounded - x).detach()


class Mat:
    """A stored matrix [out, in] (f32 values) and the rounding its product applies to x."""

    def __init__(self, w, qtype, trainable):
        self.w = w.clone().requires_grad_(trainable)
        self.qtype = qtype
        self.trainable = trainable
        self.lora = []  # (A, B, scale)

    def __call__(self, x):
        xr = x
        if not self.trainable:  # a frozen stored weight rounds its activations
            if self.qtype == Q.F16:
                xr = ste(x, x.half().float())
            elif self.qtype == Q.Q8_0:
                xr = ste(x, q8_0_round(x))
            elif self.qtype in KQUANTS:
                xr = ste(x, q8_k_round(x))
            elif self.qtype != Q.F32:
                raise SystemExit(f"no activation rounding for {self.qtype!r}")
        y = xr @ self.w.t()
        for a, b, s in self.lora:
            y = y + ((x @ a.t()) @ b.t()) * s
        return y


def load(path, trainable):
    r = gguf.GGUFReader(path)
    kv = {}
    for f in r.fields.values():
        if f.types and f.types[0] != gguf.GGUFValueType.ARRAY:
            kv[f.name] = f.parts[f.data[0]].tolist()[0] if f.types[0] != gguf.GGUFValueType.STRING \
                else bytes(f.parts[f.data[0]]).decode()
    t = {}
    for ten in r.tensors:
        shape = [int(s) for s in reversed(ten.shape.tolist())]
        vals = gguf.quants.dequantize(ten.data, ten.tensor_type).astype(np.float32).reshape(shape)
        t[ten.name] = (torch.from_numpy(np.ascontiguousarray(vals)), ten.tensor_type)
    return kv, t


def rope(x, pos, base, neox):
    """x [n, heads, hd] rotated as ggml_rope (normal: adjacent pairs; neox: halves)."""
    n, h, d = x.shape
    i = torch.arange(d // 2, dtype=torch.float64)
    theta = pos.double()[:, None] * torch.pow(torch.tensor(base, dtype=torch.float64), -2.0 * i / d)[None, :]
    dt = torch.get_default_dtype()
    c, s = torch.cos(theta).to(dt)[:, None, :], torch.sin(theta).to(dt)[:, None, :]
    if neox:
        x0, x1 = x[..., : d // 2], x[..., d // 2:]
        return torch.cat([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1).reshape(n, h, d)


def rms(x, w, eps):
    return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps) * w


def compute(kv, t, case, seq_lens, dtype):
    """The loss and {name: gradient} of the case in `dtype` (rounding emulation as f32/f16)."""
    torch.set_default_dtype(dtype)
    t = {k: (v.to(dtype), q) for k, (v, q) in t.items()}
    arch = kv["general.architecture"]
    full = case["mode"] == "full"
    n_layer = kv[f"{arch}.block_count"]
    n_head, n_kv = kv[f"{arch}.attention.head_count"], kv[f"{arch}.attention.head_count_kv"]
    eps = kv[f"{arch}.attention.layer_norm_rms_epsilon"]
    base = kv.get(f"{arch}.rope.freq_base", 10000.0)
    embd = kv[f"{arch}.embedding_length"]
    hd = kv.get(f"{arch}.attention.key_length", embd // n_head)
    neox = arch != "llama"
    moe = arch == "qwen3moe"

    params = {}

    def mat(name):
        w, q = t[name]
        m = Mat(w, q, full)
        if full:
            params[name] = m.w
        return m

    def vec(name):
        v = t[name][0].clone().requires_grad_(full)
        if full:
            params[name] = v
        return v

    tok = mat("token_embd.weight")
    out = mat("output.weight") if "output.weight" in t else tok
    out_norm = vec("output_norm.weight")
    layers = []
    for l in range(n_layer):
        b = f"blk.{l}."
        L = {"attn_norm": vec(b + "attn_norm.weight"), "ffn_norm": vec(b + "ffn_norm.weight"),
             "q": mat(b + "attn_q.weight"), "k": mat(b + "attn_k.weight"), "v": mat(b + "attn_v.weight"),
             "o": mat(b + "attn_output.weight")}
        if b + "attn_q_norm.weight" in t:
            L["q_norm"], L["k_norm"] = vec(b + "attn_q_norm.weight"), vec(b + "attn_k_norm.weight")
        if moe:
            L["router"] = mat(b + "ffn_gate_inp.weight")
            for e in ["gate_exps", "up_exps", "down_exps"]:
                w, q = t[b + f"ffn_{e}.weight"]
                stack = w.clone().requires_grad_(full)
                if full:
                    params[b + f"ffn_{e}.weight"] = stack
                L[e] = (stack, q)
        else:
            L["gate"], L["up"], L["down"] = mat(b + "ffn_gate.weight"), mat(b + "ffn_up.weight"), mat(b + "ffn_down.weight")
        layers.append(L)

    if not full:  # LoRA factors in attach order: layer, then target
        names = {"q": "attn_q", "k": "attn_k", "v": "attn_v", "o": "attn_output", "gate": "ffn_gate", "up": "ffn_up",
                 "down": "ffn_down"}
        targets = list(names) if case["targets"] == "all" else case["targets"].split(",")
        rank, scale = case["rank"], case["alpha"] / case["rank"]
        m = 0
        for l, L in enumerate(layers):
            for tg in targets:
                w = L[tg].w
                ja = torch.arange(rank * w.shape[1], dtype=torch.float64)
                jb = torch.arange(w.shape[0] * rank, dtype=torch.float64)
                a = (0.05 * torch.sin(0.37 * (ja + 1) + m)).to(torch.get_default_dtype()).reshape(rank, w.shape[1]).requires_grad_(True)
                bb = (0.05 * torch.cos(0.23 * (jb + 1) + m)).to(torch.get_default_dtype()).reshape(w.shape[0], rank).requires_grad_(True)
                L[tg].lora.append((a, bb, scale))
                name = f"blk.{l}.{names[tg]}.weight"
                params[name + ".lora_a"], params[name + ".lora_b"] = a, bb
                m += 1

    def expert_mm(x, stack_q, e):
        stack, q = stack_q
        xr = x if full or q == Q.F32 else ste(x, x.half().float()) if q == Q.F16 else None
        if xr is None:
            raise SystemExit(f"experts of type {q!r} not emulated")
        return xr @ stack[e].t()

    def moe_ffn(h, L):
        n = h.shape[0]
        k = kv[f"{arch}.expert_used_count"]
        p = torch.softmax(L["router"](h), dim=-1)
        outs = []
        for ti in range(n):
            order = sorted(range(p.shape[1]), key=lambda e: -float(p[ti, e]))[:k]
            s = torch.clamp(sum(p[ti, e] for e in order), min=2.0 ** -14)
            acc = None
            for e in order:
                x = h[ti: ti + 1]
                y = expert_mm(torch.nn.functional.silu(expert_mm(x, L["gate_exps"], e)) * expert_mm(x, L["up_exps"], e),
                              L["down_exps"], e) * (p[ti, e] / s)
                acc = y if acc is None else acc + y
            outs.append(acc)
        return torch.cat(outs, dim=0)

    vocab = t["token_embd.weight"][0].shape[0]
    ids = [[(37 * i + 11 * s + 5) % vocab for i in range(n)] for s, n in enumerate(seq_lens)]
    loss_sum, count = 0.0, 0
    for seq in ids:
        n = len(seq)
        x = tok.w[torch.tensor(seq)] if full else tok.w[torch.tensor(seq)].detach()
        pos = torch.arange(n)
        for L in layers:
            h = rms(x, L["attn_norm"], eps)
            q = L["q"](h).reshape(n, n_head, hd)
            kk = L["k"](h).reshape(n, n_kv, hd)
            v = L["v"](h).reshape(n, n_kv, hd)
            if "q_norm" in L:
                q, kk = rms(q, L["q_norm"], eps), rms(kk, L["k_norm"], eps)
            q, kk = rope(q, pos, base, neox), rope(kk, pos, base, neox)
            grp = n_head // n_kv
            kk, v = kk.repeat_interleave(grp, dim=1), v.repeat_interleave(grp, dim=1)
            sc = torch.einsum("qhd,khd->hqk", q, kk) / math.sqrt(hd)
            sc = sc.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
            o = torch.einsum("hqk,khd->qhd", torch.softmax(sc, dim=-1), v).reshape(n, n_head * hd)
            x = x + L["o"](o)
            h2 = rms(x, L["ffn_norm"], eps)
            x = x + (moe_ffn(h2, L) if moe else L["down"](torch.nn.functional.silu(L["gate"](h2)) * L["up"](h2)))
        logits = out(rms(x, out_norm, eps))
        keep = [i for i in range(n - 1) if i % 5 != 3]
        lp = torch.log_softmax(logits[keep], dim=-1)
        loss_sum = loss_sum + (-lp[torch.arange(len(keep)), torch.tensor([seq[i + 1] for i in keep])]).sum()
        count += len(keep)
    loss = loss_sum / count
    loss.backward()
    torch.set_default_dtype(torch.float32)
    return float(loss), {name: p.grad.detach().double().numpy().ravel() for name, p in params.items()}


def run_case(fucina, case, seq_lens):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.gguf")
        subprocess.run([fucina, "synth", path] + synth_flags(case["spec"]), check=True, stdout=subprocess.DEVNULL)
        if case.get("quant"):
            qpath = os.path.join(tmp, "q.gguf")
            subprocess.run([fucina, "quantize", path, qpath, case["quant"]], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            path = qpath
        sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
        kv, t = load(path, case["mode"] == "full")
    loss, grads = compute(kv, t, case, seq_lens, torch.float32)
    _, grads64 = compute(kv, t, case, seq_lens, torch.float64)

    blob, index = [], []
    off = 0
    for name, g in grads.items():
        g64 = grads64[name]
        # How well the problem itself is conditioned: PyTorch's own f32 against f64. Where the
        # forward rounds activations (f16, Q8_K), an ulp moves a rounding and this is ~2e-4.
        cond = float(np.linalg.norm(g - g64) / max(np.linalg.norm(g64), 1e-30))
        index.append({"name": name, "numel": int(g.size), "offset": off, "torch_f32_vs_f64": cond})
        blob.append(g.astype(np.float32))
        off += g.size
    doc = {"case": case["name"], "model_sha256": sha, "loss": loss, "tensors": index,
           "made_by": "scripts/parity/train_grad_goldens.py (PyTorch " + torch.__version__ + ")"}
    with open(os.path.join(DATA, case["name"] + ".json"), "w") as f:
        json.dump(doc, f, indent=1)
    np.concatenate(blob).tofile(os.path.join(DATA, case["name"] + ".bin"))
    worst = max(i["torch_f32_vs_f64"] for i in index)
    print(f"{case['name']}: loss {loss:.6f}, {len(index)} tensors, {off} values, torch f32 vs f64 up to {worst:.1e}")


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    cfg = json.load(open(os.path.join(DATA, "grad_cases.json")))
    for case in cfg["cases"]:
        if only is None or case["name"] == only:
            run_case(sys.argv[1], case, cfg["seq_lens"])


if __name__ == "__main__":
    main()
