#!/usr/bin/env python3
"""Golden trajectories for Fucina's optimizers (tests/data/optim/*.json).

Run with a PyTorch (tested: Debian python3-torch 1.13) and numpy:
    OPENBLAS_CORETYPE=SkylakeX ATEN_CPU_CAPABILITY=default \
        /usr/bin/python3 tools/dev/optim_goldens/gen_optim_goldens.py tests/data/optim

ATEN_CPU_CAPABILITY=default selects torch's baseline kernels, which never fuse a*b+c into
an FMA; Fucina builds with -ffp-contract=off, so both sides round every operation alike.

Problem: params w1 [8,16] (wide), b [16], w2 [12,6] (tall), f32, fixed random init.
Gradient at every step: g = w*c + d (f32, elementwise, constants c, d per element).
50 steps; the JSON stores init, c, d, the config and the weights after steps 1, 10, 50.

SGD and AdamW run the real torch.optim classes. Muon is Keller Jordan's
SingleDeviceMuonWithAuxAdam (muon.py) transcribed with bf16 replaced by f32. APOLLO is
apollo_torch's AdamW/Apollo step ("std" random projection) transcribed, with the
projection matrix drawn from Fucina's counter RNG (fucina/core/rng.hpp, ported below)
instead of torch.Generator, so both sides use the same P.
"""
import json
import math
import os
import sys

import numpy as np
import torch

torch.set_num_threads(1)

NAMES = ["w1", "b", "w2"]
SHAPES = {"w1": [8, 16], "b": [16], "w2": [12, 6]}
STEPS = 50
SNAPSHOTS = [1, 10, 50]

# ---- fucina::rng port (uint64 arithmetic with Python ints) ----
M64 = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def rng_bits(seed, i):
    return splitmix64(splitmix64(seed) ^ ((i * 0xD1B54A32D192ED03) & M64))


def rng_normal(seed, i):
    r = rng_bits(seed, i)
    u1 = (float(r >> 32) + 1.0) * (1.0 / 4294967296.0)
    u2 = float(r & 0xFFFFFFFF) * (1.0 / 4294967296.0)
    return np.float32(math.sqrt(-2.0 * math.log(u1)) * math.cos(6.283185307179586 * u2))


def apollo_stream(seed, key, generation):
    h = 0xCBF29CE484222325
    for ch in key.encode():
        h = ((h ^ ch) * 0x100000001B3) & M64
    return rng_bits(seed ^ h, generation)


def apollo_projection(seed, key, generation, shape, rank):
    tall = shape[0] >= shape[1]
    pshape = (rank, shape[1]) if tall else (shape[0], rank)
    stream = apollo_stream(seed, key, generation)
    vals = np.array([rng_normal(stream, j) for j in range(pshape[0] * pshape[1])], dtype=np.float32)
    return torch.from_numpy(vals.reshape(pshape)) / math.sqrt(rank)


# ---- the fixed problem ----
def make_problem():
    gen = np.random.default_rng(20260303)
    init, c, d = {}, {}, {}
    for n in NAMES:
        shape = SHAPES[n]
        init[n] = gen.standard_normal(shape).astype(np.float32)
        c[n] = gen.uniform(0.5, 1.5, shape).astype(np.float32)
        d[n] = (gen.standard_normal(shape) * 0.5).astype(np.float32)
    return init, c, d


def schedule_factor(step, warm, total, min_ratio):
    # Same f64 expression as fucina::optim::LrSchedule::cosine.
    if step < warm:
        return (step + 1) / warm
    span = max(1, total - warm)
    p = min(1.0, (step - warm) / span)
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(3.141592653589793 * p))


# ---- Muon reference (Keller Jordan, muon.py; bf16 -> f32) ----
def zeropower_via_newtonschulz5(G, steps):
    a, b, c = (3.4445, -4.7750, 2.0315)
    X = G.float()
    if G.size(-2) > G.size(-1):
        X = X.mT
    X = X / (X.norm(dim=(-2, -1), keepdim=True) + 1e-7)
    for _ in range(steps):
        A = X @ X.mT
        B = b * A + c * A @ A
        X = a * X + B @ X
    if G.size(-2) > G.size(-1):
        X = X.mT
    return X


def muon_update(grad, momentum, beta=0.95, ns_steps=5, nesterov=True):
    momentum.lerp_(grad, 1 - beta)
    update = grad.lerp_(momentum, beta) if nesterov else momentum
    update = zeropower_via_newtonschulz5(update, steps=ns_steps)
    update *= max(1, grad.size(-2) / grad.size(-1)) ** 0.5
    return update


def adam_update(grad, buf1, buf2, step, betas, eps):
    buf1.lerp_(grad, 1 - betas[0])
    buf2.lerp_(grad.square(), 1 - betas[1])
    buf1c = buf1 / (1 - betas[0] ** step)
    buf2c = buf2 / (1 - betas[1] ** step)
    return buf1c / (buf2c.sqrt() + eps)


class SingleDeviceMuonWithAuxAdam(torch.optim.Optimizer):
    def __init__(self, param_groups):
        super().__init__(param_groups, dict())

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if group["use_muon"]:
                    if len(state) == 0:
                        state["momentum_buffer"] = torch.zeros_like(p)
                    update = muon_update(p.grad, state["momentum_buffer"], beta=group["momentum"])
                    p.mul_(1 - group["lr"] * group["weight_decay"])
                    p.add_(update.reshape(p.shape), alpha=-group["lr"])
                else:
                    if len(state) == 0:
                        state["exp_avg"] = torch.zeros_like(p)
                        state["exp_avg_sq"] = torch.zeros_like(p)
                        state["step"] = 0
                    state["step"] += 1
                    update = adam_update(p.grad, state["exp_avg"], state["exp_avg_sq"], state["step"],
                                         group["betas"], group["eps"])
                    p.mul_(1 - group["lr"] * group["weight_decay"])
                    p.add_(update, alpha=-group["lr"])


# ---- APOLLO reference (apollo_torch AdamW/Apollo step, random "std" projection) ----
class ApolloRef(torch.optim.Optimizer):
    def __init__(self, param_groups, names, seed, update_proj_gap, defaults):
        super().__init__(param_groups, defaults)
        self.names = names  # param id -> key (the projection stream follows the key)
        self.seed = seed
        self.gap = update_proj_gap

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                grad = p.grad
                state = self.state[p]
                if "step" not in state:
                    state["step"] = 0
                if "rank" in group:
                    it = state["step"]
                    if "proj" not in state or it % self.gap == 0:
                        state["proj"] = apollo_projection(self.seed, self.names[id(p)], it // self.gap,
                                                          list(grad.shape), group["rank"])
                    P = state["proj"]
                    if grad.shape[0] >= grad.shape[1]:
                        grad = torch.matmul(grad, P.t())
                    else:
                        grad = torch.matmul(P.t(), grad)
                if "exp_avg" not in state:
                    state["exp_avg"] = torch.zeros_like(grad)
                    state["exp_avg_sq"] = torch.zeros_like(grad)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                beta1, beta2 = group["betas"]
                state["step"] += 1
                exp_avg.mul_(beta1).add_(grad, alpha=(1.0 - beta1))
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
                denom = exp_avg_sq.sqrt().add_(group["eps"])
                step_size = group["lr"]
                bias_correction1 = 1.0 - beta1 ** state["step"]
                bias_correction2 = 1.0 - beta2 ** state["step"]
                step_size = step_size * math.sqrt(bias_correction2) / bias_correction1
                norm_grad = exp_avg / denom
                if "rank" in group:
                    if group["scale_type"] == "channel":
                        norm_dim = 0 if norm_grad.shape[0] < norm_grad.shape[1] else 1
                        scaling_factor = torch.norm(norm_grad, dim=norm_dim) / (torch.norm(grad, dim=norm_dim) + 1e-8)
                        if norm_dim == 1:
                            scaling_factor = scaling_factor.unsqueeze(1)
                    else:
                        scaling_factor = torch.norm(norm_grad) / (torch.norm(grad) + 1e-8)
                    scaled_grad = p.grad * scaling_factor
                    if "scaled_grad" in state:
                        scaled_grad_norm = torch.norm(scaled_grad)
                        limiter = max(scaled_grad_norm / (state["scaled_grad"] + 1e-8), 1.01) / 1.01
                        scaled_grad = scaled_grad / limiter
                        state["scaled_grad"] = scaled_grad_norm / limiter
                    else:
                        state["scaled_grad"] = torch.norm(scaled_grad)
                    norm_grad = scaled_grad
                    norm_grad *= np.sqrt(group["scale"])
                p.add_(norm_grad, alpha=-step_size)
                if group["weight_decay"] > 0.0:
                    p.add_(p, alpha=(-group["lr"] * group["weight_decay"]))


# ---- cases ----
CASES = {
    "sgd_plain": {"optimizer": "sgd", "lr": 0.05, "momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0,
                  "nesterov": False},
    "sgd_momentum": {"optimizer": "sgd", "lr": 0.05, "momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01,
                     "nesterov": False},
    "sgd_nesterov": {"optimizer": "sgd", "lr": 0.05, "momentum": 0.9, "dampening": 0.0, "weight_decay": 0.001,
                     "nesterov": True},
    "adamw": {"optimizer": "adamw", "lr": 0.01, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.1},
    "adamw_cosine_clip": {"optimizer": "adamw", "lr": 0.02, "beta1": 0.9, "beta2": 0.99, "eps": 1e-8,
                          "weight_decay": 0.01, "clip": 1.0,
                          "schedule": {"warmup": 5, "total": 50, "min_ratio": 0.1}},
    "muon": {"optimizer": "muon", "lr": 0.02, "momentum": 0.95, "weight_decay": 0.01, "ns_steps": 5,
             "adam_lr": 0.003, "adam_beta1": 0.9, "adam_beta2": 0.95, "adam_eps": 1e-10, "adam_weight_decay": 0.01},
    "apollo": {"optimizer": "apollo", "lr": 0.01, "beta1": 0.9, "beta2": 0.999, "eps": 1e-6, "weight_decay": 0.01,
               "rank": 4, "update_proj_gap": 20, "scale": 1.0, "scale_type": "channel", "seed": 7},
    "apollo_mini": {"optimizer": "apollo", "lr": 0.001, "beta1": 0.9, "beta2": 0.999, "eps": 1e-6,
                    "weight_decay": 0.0, "rank": 1, "update_proj_gap": 20, "scale": 128.0, "scale_type": "tensor",
                    "seed": 7},
}


def make_optimizer(cfg, params):
    kind = cfg["optimizer"]
    if kind == "sgd":
        return torch.optim.SGD(list(params.values()), lr=cfg["lr"], momentum=cfg["momentum"],
                               dampening=cfg["dampening"], weight_decay=cfg["weight_decay"], nesterov=cfg["nesterov"])
    if kind == "adamw":
        return torch.optim.AdamW(list(params.values()), lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]),
                                 eps=cfg["eps"], weight_decay=cfg["weight_decay"])
    matrix = [params[n] for n in NAMES if len(SHAPES[n]) == 2]
    other = [params[n] for n in NAMES if len(SHAPES[n]) != 2]
    if kind == "muon":
        return SingleDeviceMuonWithAuxAdam([
            dict(params=matrix, use_muon=True, lr=cfg["lr"], momentum=cfg["momentum"],
                 weight_decay=cfg["weight_decay"]),
            dict(params=other, use_muon=False, lr=cfg["adam_lr"], betas=(cfg["adam_beta1"], cfg["adam_beta2"]),
                 eps=cfg["adam_eps"], weight_decay=cfg["adam_weight_decay"]),
        ])
    if kind == "apollo":
        defaults = dict(lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"],
                        weight_decay=cfg["weight_decay"])
        names = {id(params[n]): n for n in NAMES}
        return ApolloRef([dict(params=matrix, rank=cfg["rank"], scale_type=cfg["scale_type"], scale=cfg["scale"]),
                          dict(params=other)], names, cfg["seed"], cfg["update_proj_gap"], defaults)
    raise ValueError(kind)


def floats(t):
    return [float(v) for v in np.asarray(t, dtype=np.float32).reshape(-1)]


def run_case(name, cfg, init, c, d):
    params = {n: torch.tensor(init[n]).clone() for n in NAMES}
    for p in params.values():
        p.requires_grad_(True)
    ct = {n: torch.tensor(c[n]) for n in NAMES}
    dt = {n: torch.tensor(d[n]) for n in NAMES}
    opt = make_optimizer(cfg, params)
    sched = None
    if "schedule" in cfg:
        s = cfg["schedule"]
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda step: schedule_factor(step, s["warmup"], s["total"], s["min_ratio"]))
    snaps, norms = {}, []
    for step in range(1, STEPS + 1):
        with torch.no_grad():
            for n in NAMES:
                params[n].grad = params[n].detach() * ct[n] + dt[n]
        if "clip" in cfg:
            norms.append(float(torch.nn.utils.clip_grad_norm_(list(params.values()), cfg["clip"])))
        opt.step()
        if sched is not None:
            sched.step()
        if step in SNAPSHOTS:
            snaps[str(step)] = {n: floats(params[n].detach()) for n in NAMES}
    out = {"case": name, "config": cfg, "names": NAMES, "shapes": SHAPES, "steps": STEPS,
           "init": {n: floats(init[n]) for n in NAMES}, "c": {n: floats(c[n]) for n in NAMES},
           "d": {n: floats(d[n]) for n in NAMES}, "snapshots": snaps,
           "generator": f"torch {torch.__version__}, ATEN_CPU_CAPABILITY={os.environ.get('ATEN_CPU_CAPABILITY', '')}"}
    if norms:
        out["clip_norms"] = norms
    if cfg["optimizer"] == "apollo":
        stream = apollo_stream(cfg["seed"], "w1", 0)
        out["rng_check"] = {"stream": str(stream), "normals": [float(rng_normal(stream, j)) for j in range(8)]}
    return out


def clip_golden(init, c, d):
    out = {}
    for label, max_norm in (("active", 1.0), ("inactive", 1000.0)):
        grads = [torch.tensor(init[n]) * torch.tensor(c[n]) + torch.tensor(d[n]) for n in NAMES]
        ps = [torch.zeros_like(g, requires_grad=True) for g in grads]
        for p, g in zip(ps, grads):
            p.grad = g.clone()
        norm = torch.nn.utils.clip_grad_norm_(ps, max_norm)
        out[label] = {"max_norm": max_norm, "norm": float(norm),
                      "grads": {n: floats(p.grad) for n, p in zip(NAMES, ps)}}
    return out


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "tests/data/optim"
    os.makedirs(outdir, exist_ok=True)
    init, c, d = make_problem()
    for name, cfg in CASES.items():
        with open(os.path.join(outdir, name + ".json"), "w") as f:
            json.dump(run_case(name, cfg, init, c, d), f, separators=(",", ":"))
    with open(os.path.join(outdir, "clip.json"), "w") as f:
        json.dump({"names": NAMES, "shapes": SHAPES, "init": {n: floats(init[n]) for n in NAMES},
                   "c": {n: floats(c[n]) for n in NAMES}, "d": {n: floats(d[n]) for n in NAMES},
                   "cases": clip_golden(init, c, d)}, f, separators=(",", ":"))
    print("wrote", len(CASES) + 1, "files to", outdir)


if __name__ == "__main__":
    main()
