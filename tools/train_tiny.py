#!/usr/bin/env python3
"""Train the bundled GreenFormer (a small config of the same network family and code path as
hiera_base_plus) on procedural green-screen data, on CPU, reproducibly.

  python tools/train_tiny.py --out checkpoints/greenformer_small_synthetic384 --arch small \
      --img-size 384 --sizes 192,256,320,384 --pool 2400 --steps 2000

Writes <out>.pth (torch.save {"state_dict": ...}), <out>.ts (TorchScript whose config.json
states arch and img_size, via tools/export_torchscript.py) and <out>.train.json (command,
seed, data, timings, losses).

Data: tools/make_synthetic.py with the held-out family (plants over panel screens) never
generated. Each sample is rendered at a frame size of its own (long side 0.8-1.8 x its model
size, aspect 1-2.2, some portrait), delivered as an sRGB or scene-linear plate, then turned
into what the engine hands the model at that size (`model_view`: antialiased resize to
S x S, linear -> sRGB after the resize). A pool is generated up front (seeded; cached with
--pool-cache) and reused with horizontal flips.

Multi-scale: the model is trained at every size in --sizes (one network; the smaller sizes
see the img_size position embedding resized bicubically, as the engine resizes it for
--img-size), with a constant pixel budget per step; the last --final-fraction of the steps
run at --img-size only, the size the checkpoint states and the engine uses by default.

Loss: L1 alpha + 0.5 L1 coarse alpha + L1 alpha gradients + 0.5 Laplacian-pyramid L1 on
alpha + 0.5 L1 over the transition region (partial alpha and 3 px around it, normalised by
its area) + L1 foreground where the true alpha > 0 + L1 of the composite over the known
screen in linear light. refiner.final starts at zero (as upstream). The exported weights are
an exponential moving average of the trained ones.

bf16 autocast (--bf16 auto: on CPUs with AMX or AVX-512 BF16) is 3.3x faster per step on the
2-core Zen 5 here, which has AVX-512 BF16 but no AMX (tiny at 384, batch 4: 0.58 s vs 1.96 s
in float32; the convolution backward dominates and runs 3.5x faster). Channels-last makes
bf16 slower here (1.02 s) and float32 faster (1.32 s), so it is off by default. The engine
runs this model in bf16 on such CPUs too (model_precision auto).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import multiprocessing as mp
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export_torchscript as ex  # noqa: E402
import greenformer_ref as gr  # noqa: E402
import make_synthetic as ms  # noqa: E402

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
HELDOUT_SEED_BASE = 1_000_000   # evaluation seeds (tools/evaluate.py); training seeds stay below
VAL_SEED = HELDOUT_SEED_BASE - 1


def model_input(plate: torch.Tensor, hint: torch.Tensor) -> torch.Tensor:
    return torch.cat([(plate - MEAN) / STD, hint], 1)


# ---------------------------------------------------------------------------------------
# Data pool

def frame_size(rng: np.random.Generator, size: int):
    """A frame (W, H) for model size `size`: long side 0.8-1.8 x size, aspect 1-2.2."""
    long = size * rng.uniform(0.8, 1.8)
    short = long / rng.uniform(1.0, 2.2)
    w, h = int(round(long)), max(32, int(round(short)))
    return (h, w) if rng.random() < 0.12 else (w, h)  # some portrait frames


def make_sample(args):
    """(seed, size, blue) -> compact tensors at size x size (a worker: no shared state)."""
    seed, size, blue = args
    rng = np.random.default_rng(seed)
    w, h = frame_size(rng, size)
    s = ms.generate(rng, h, w, screen_color="blue" if blue else "green", swap_gb=blue)
    v = ms.model_view(s, size)
    return dict(plate=v["plate"].half(), hint=(v["hint"] * 255 + 0.5).to(torch.uint8),
                alpha=v["alpha"].half(), fg=(v["fg"] * 255 + 0.5).to(torch.uint8),
                background=(ms.linear_to_srgb(v["background"]).clamp(0, 1) * 255 + 0.5).to(torch.uint8),
                linear=s["linear"], family=s["scene"].family)


def make_pool(n: int, sizes, weights, seed: int, blue_fraction: float, workers: int):
    rng = np.random.default_rng(seed)
    jobs = [(int(seed * 10_000_000 + i), int(rng.choice(sizes, p=weights)), bool(rng.random() < blue_fraction))
            for i in range(n)]
    counts = {s: sum(j[1] == s for j in jobs) for s in sizes}
    pool, fill = {}, {s: 0 for s in sizes}
    stats = dict(linear=0, blue=sum(j[2] for j in jobs), families={f: 0 for f in ms.TRAIN_FAMILIES})
    ctx = mp.get_context("fork").Pool(workers, initializer=torch.set_num_threads, initargs=(1,)) if workers > 1 else None
    results = ctx.imap(make_sample, jobs, chunksize=4) if ctx else map(make_sample, jobs)
    for (_, size, _), s in zip(jobs, results):  # filled in place: no second copy of the pool
        if size not in pool:
            pool[size] = {k: torch.empty((counts[size],) + tuple(s[k].shape), dtype=s[k].dtype)
                          for k in ("plate", "hint", "alpha", "fg", "background")}
        for k, t in pool[size].items():
            t[fill[size]] = s[k]
        fill[size] += 1
        stats["linear"] += int(s["linear"])
        stats["families"][s["family"]] += 1
    if ctx:
        ctx.close()
    return {s: pool[s] for s in sorted(pool)}, stats


def as_float(batch):
    return dict(plate=batch["plate"].float(), hint=batch["hint"].float() / 255, alpha=batch["alpha"].float(),
                fg=batch["fg"].float() / 255, background=ms.srgb_to_linear(batch["background"].float() / 255))


def validation_set(n: int, size: int):
    """Training-family frames with their own seeds (no held-out family), at the model size."""
    out = [make_sample((VAL_SEED * 100 + i, size, False)) for i in range(n)]
    return as_float({k: torch.stack([o[k] for o in out]) for k in ("plate", "hint", "alpha", "fg", "background")})


# ---------------------------------------------------------------------------------------
# One network, several sizes

class MultiSize:
    """GreenFormers at several img_sizes sharing every module of the img_size model; the
    others use its pos_embed resized bicubically (differentiable) to their token grid."""

    def __init__(self, arch, img_size: int, sizes):
        self.master = gr.build_greenformer(arch, img_size)
        self.img_size = img_size
        self.models = {img_size: self.master}
        mh = self.master.encoder.model
        for s in sizes:
            if s == img_size:
                continue
            m = gr.build_greenformer(arch, s)
            h = m.encoder.model
            h.patch_embed, h.blocks = mh.patch_embed, mh.blocks
            m.alpha_decoder, m.fg_decoder, m.refiner = (self.master.alpha_decoder, self.master.fg_decoder,
                                                        self.master.refiner)
            del h._parameters["pos_embed"]
            h.pos_embed = None
            self.models[s] = m

    def __call__(self, size: int, x: torch.Tensor):
        m = self.models[size]
        if size != self.img_size:
            m.encoder.model.pos_embed = gr.resize_pos_embed(self.master.encoder.model.pos_embed, size // 4)
        return m(x)

    def train(self, on: bool = True):
        for m in self.models.values():
            m.train(on)


# ---------------------------------------------------------------------------------------
# Loss

def _sobel(a: torch.Tensor):
    kx = torch.tensor([[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]], dtype=a.dtype).view(1, 1, 3, 3) / 8
    p = F.pad(a, (1, 1, 1, 1), mode="replicate")
    return F.conv2d(p, kx), F.conv2d(p, kx.transpose(2, 3))


def _laplacian_l1(a: torch.Tensor, b: torch.Tensor, levels: int = 4):
    loss = 0.0
    for i in range(levels):
        a2, b2 = F.avg_pool2d(a, 2), F.avg_pool2d(b, 2)
        la = a - F.interpolate(a2, size=a.shape[-2:], mode="bilinear", align_corners=False)
        lb = b - F.interpolate(b2, size=b.shape[-2:], mode="bilinear", align_corners=False)
        loss = loss + F.l1_loss(la, lb) * (2 ** i)
        a, b = a2, b2
    return loss + F.l1_loss(a, b)


def losses(out, batch):
    alpha, fg, alpha_coarse = out[11].float(), out[12].float(), out[8].float()
    a_gt, fg_gt, bg = batch["alpha"], batch["fg"], batch["background"]
    l_alpha = F.l1_loss(alpha, a_gt)
    l_coarse = F.l1_loss(alpha_coarse, a_gt)
    gx, gy = _sobel(alpha)
    tx, ty = _sobel(a_gt)
    l_grad = (F.l1_loss(gx, tx) + F.l1_loss(gy, ty)) * 4
    l_lap = _laplacian_l1(alpha, a_gt)
    # the transition region (partial alpha, 3 px around it) on its own: edges, strands,
    # see-through parts are a small share of the pixels but most of the error
    trans = F.max_pool2d(((a_gt > 0.004) & (a_gt < 0.996)).float(), 7, 1, 3)
    l_unk = (torch.abs(alpha - a_gt) * trans).sum() / (trans.sum() + 64)
    w = (a_gt > 0.01).float()
    l_fg = (torch.abs(fg - fg_gt) * w).sum() / (w.sum() * 3 + 1)
    lin = ms.srgb_to_linear
    comp = alpha * lin(fg) + (1 - alpha) * bg
    comp_gt = a_gt * lin(fg_gt) + (1 - a_gt) * bg
    l_comp = F.l1_loss(comp, comp_gt) * 2
    total = l_alpha + 0.5 * l_coarse + l_grad + 0.5 * l_lap + 0.5 * l_unk + l_fg + l_comp
    return total, dict(alpha=l_alpha.item(), grad=l_grad.item(), lap=l_lap.item(), unknown=l_unk.item(),
                       fg=l_fg.item(), comp=l_comp.item())


def use_bf16(mode: str) -> bool:
    """auto: on CPUs with AMX tiles or AVX-512 BF16 (oneDNN's bf16 convolutions and matmuls)."""
    if mode in ("on", "off"):
        return mode == "on"
    cpu = torch.cpu
    return bool(getattr(cpu, "_is_amx_tile_supported", lambda: False)()
                or getattr(cpu, "_is_avx512_bf16_supported", lambda: False)())


# ---------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="checkpoints/greenformer_small_synthetic384")
    ap.add_argument("--arch", default="small", choices=sorted(gr.CONFIGS))
    ap.add_argument("--img-size", type=int, default=384, help="the checkpoint's working size")
    ap.add_argument("--sizes", default="192,256,320,384", help="training sizes (multi-scale)")
    ap.add_argument("--size-weights", default="0.15,0.2,0.25,0.4")
    ap.add_argument("--final-fraction", type=float, default=0.3, help="last steps at --img-size only")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=4, help="samples per step at --img-size (more when smaller)")
    ap.add_argument("--pool", type=int, default=2400, help="training samples generated up front")
    ap.add_argument("--pool-cache", help="torch.save the pool here / load it if present")
    ap.add_argument("--blue-fraction", type=float, default=0.1, help="blue-screen plates with G/B swapped")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--ema", type=float, default=0.998)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bf16", choices=["auto", "on", "off"], default="auto",
                    help="bf16 autocast (auto: with AMX or AVX-512 BF16)")
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--val", type=int, default=32, help="validation frames (training families, own seeds)")
    ap.add_argument("--log-every", type=int, default=250)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    sizes = [int(s) for s in a.sizes.split(",")]
    weights = np.array([float(w) for w in a.size_weights.split(",")])
    weights = weights / weights.sum()
    if a.img_size not in sizes:
        raise SystemExit("--img-size must be one of --sizes")

    t0 = time.time()
    if a.pool_cache and os.path.exists(a.pool_cache):
        cached = torch.load(a.pool_cache, weights_only=False)
        pool, stats = cached["pool"], cached["stats"]
        t_data = cached["seconds"]
        print(f"loaded the pool from {a.pool_cache} (generated in {t_data:.0f}s)", flush=True)
    else:
        pool, stats = make_pool(a.pool, sizes, weights, a.seed, a.blue_fraction, a.threads)
        t_data = time.time() - t0
        if a.pool_cache:
            torch.save(dict(pool=pool, stats=stats, seconds=t_data), a.pool_cache)
    counts = {s: int(b["alpha"].shape[0]) for s, b in sorted(pool.items())}
    val = validation_set(a.val, a.img_size)
    print(f"pool: {counts} samples per size ({stats}); data {t_data:.0f}s", flush=True)

    net = MultiSize(a.arch, a.img_size, sizes)
    model = net.master
    with torch.no_grad():  # as upstream: the refiner starts as a no-op (timm's init saturates alpha)
        model.refiner.final.weight.zero_()
        model.refiner.final.bias.zero_()
    bf16 = use_bf16(a.bf16)
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    model.to(memory_format=fmt)
    ema = copy.deepcopy(model).eval()
    for p in ema.parameters():
        p.requires_grad_(False)
    params = [p for p in model.parameters()]
    n_params = sum(p.numel() for p in params)
    opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=1e-4)
    warm = 200
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * min(1.0, s / a.steps)))))
    g = torch.Generator().manual_seed(a.seed + 1)
    final_start = int(a.steps * (1 - a.final_fraction))
    history = []
    net.train()
    t1 = time.time()
    seen = 0
    for step in range(1, a.steps + 1):
        if step > final_start:
            size = a.img_size
        else:
            size = int(sizes[int(torch.multinomial(torch.from_numpy(weights), 1, generator=g))])
        bsz = max(1, int(round(a.batch * (a.img_size / size) ** 2)))
        b = pool[size]
        idx = torch.randint(0, b["alpha"].shape[0], (bsz,), generator=g)
        batch = as_float({k: v[idx] for k, v in b.items()})
        if torch.rand(1, generator=g).item() < 0.5:
            batch = {k: v.flip(-1) for k, v in batch.items()}
        x = model_input(batch["plate"], batch["hint"]).contiguous(memory_format=fmt)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = net(size, x)
        loss, parts = losses(out, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        seen += bsz
        with torch.no_grad():
            d = min(a.ema, (1 + step) / (10 + step))
            for pe, pm in zip(ema.parameters(), model.parameters()):
                pe.mul_(d).add_(pm.detach(), alpha=1 - d)
            for be, bm in zip(ema.buffers(), model.buffers()):
                be.copy_(bm)
        if step % a.log_every == 0 or step == a.steps:
            with torch.no_grad():
                vo = ema(model_input(val["plate"], val["hint"]))
                vmse = F.mse_loss(vo[11], val["alpha"]).item()
                hmse = F.mse_loss(val["hint"], val["alpha"]).item()
            history.append(dict(step=step, size=size, loss=round(loss.item(), 5),
                                **{k: round(v, 5) for k, v in parts.items()},
                                val_alpha_mse=round(vmse, 6), seconds=round(time.time() - t1, 1)))
            print(f"step {step:5d} @{size} loss {loss.item():.4f} alpha {parts['alpha']:.4f} "
                  f"val alpha MSE {vmse:.5f} (hint {hmse:.5f}) [{time.time() - t1:.0f}s]", flush=True)
    t_train = time.time() - t1

    pth, ts = a.out + ".pth", a.out + ".ts"
    os.makedirs(os.path.dirname(os.path.abspath(pth)), exist_ok=True)
    sd = {k: v.detach().clone().contiguous() for k, v in ema.state_dict().items()}
    torch.save({"state_dict": sd}, pth)
    rc = ex.main(["--arch", a.arch, "--img-size", str(a.img_size), "--checkpoint", pth, "--output", ts])
    info = dict(command="python tools/train_tiny.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                arch=a.arch, img_size=a.img_size, sizes=sizes, size_weights=weights.round(3).tolist(),
                final_fraction=a.final_fraction, seed=a.seed, steps=a.steps, batch=a.batch, pool=a.pool,
                pool_per_size=counts, pool_stats=stats, samples_seen=seen, lr=a.lr, ema=a.ema,
                threads=a.threads, bf16=bf16, channels_last=a.channels_last, parameters=n_params,
                data_seconds=round(t_data, 1), train_seconds=round(t_train, 1),
                total_seconds=round(time.time() - t0, 1), torch=torch.__version__, history=history)
    with open(a.out + ".train.json", "w") as f:
        json.dump(info, f, indent=1)
    print(f"trained in {t_train / 60:.1f} min (+{t_data:.0f}s data); wrote {pth}, {ts}", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
