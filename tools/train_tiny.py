#!/usr/bin/env python3
"""Train the bundled GreenFormer (the `tiny` config: same network family and code path as
hiera_base_plus, smaller widths) on procedural green-screen data, on CPU, reproducibly.

  python tools/train_tiny.py --out checkpoints/greenformer_tiny_synthetic128 --steps 2500

Writes <out>.pth (torch.save {"state_dict": ...}), <out>.ts (TorchScript with config.json,
via tools/export_torchscript.py) and <out>.train.json (command, seed, timings, losses).

Data: tools/make_synthetic.py, a pool of seeded samples generated up front (training seeds
never overlap the held-out evaluation seeds, which start at 1_000_000) with random flips.
Loss (as the reference training does, simplified): L1 on the final alpha, 0.5 x L1 on the
coarse alpha, L1 on the foreground colour where the true alpha > 0, and L1 on the colour
composited over the known screen.
"""

from __future__ import annotations

import argparse
import json
import math
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
HELDOUT_SEED_BASE = 1_000_000


def make_pool(n: int, size: int, seed: int):
    rng = np.random.default_rng(seed)
    keys = ("plate", "hint", "alpha", "fg", "background")
    pool = {k: [] for k in keys}
    for _ in range(n):
        s = ms.generate(rng, size, size)
        for k in keys:
            a = s[k]
            pool[k].append(torch.from_numpy(a if a.ndim == 3 else a[..., None]).permute(2, 0, 1))
    return {k: torch.stack(v) for k, v in pool.items()}


def model_input(plate: torch.Tensor, hint: torch.Tensor) -> torch.Tensor:
    return torch.cat([(plate - MEAN) / STD, hint], 1)


def losses(out, batch):
    alpha, fg, alpha_coarse = out[11], out[12], out[8]
    a_gt, fg_gt, bg = batch["alpha"], batch["fg"], batch["background"]
    l_alpha = F.l1_loss(alpha, a_gt)
    l_coarse = F.l1_loss(alpha_coarse, a_gt)
    w = (a_gt > 0.01).float()
    l_fg = (torch.abs(fg - fg_gt) * w).sum() / (w.sum() * 3 + 1)
    comp = alpha * fg + (1 - alpha) * bg
    comp_gt = a_gt * fg_gt + (1 - a_gt) * bg
    l_comp = F.l1_loss(comp, comp_gt)
    total = l_alpha + 0.5 * l_coarse + l_fg + l_comp
    return total, dict(alpha=l_alpha.item(), coarse=l_coarse.item(), fg=l_fg.item(), comp=l_comp.item())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="checkpoints/greenformer_tiny_synthetic128")
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--steps", type=int, default=2500)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--pool", type=int, default=1200, help="training samples generated up front")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    t0 = time.time()
    pool = make_pool(a.pool, a.size, a.seed)
    val = make_pool(48, a.size, HELDOUT_SEED_BASE - 1)  # validation: its own seed
    t_data = time.time() - t0
    print(f"generated {a.pool} training + 48 validation samples at {a.size} in {t_data:.0f}s", flush=True)

    model = gr.build_greenformer("tiny", a.size)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=1e-4)
    warm = 100
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / a.steps))))
    g = torch.Generator().manual_seed(a.seed + 1)
    history = []
    t1 = time.time()
    for step in range(1, a.steps + 1):
        idx = torch.randint(0, a.pool, (a.batch,), generator=g)
        batch = {k: v[idx] for k, v in pool.items()}
        if torch.rand(1, generator=g).item() < 0.5:  # horizontal flip
            batch = {k: v.flip(-1) for k, v in batch.items()}
        out = model(model_input(batch["plate"], batch["hint"]))
        loss, parts = losses(out, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 250 == 0 or step == a.steps:
            model.eval()
            with torch.no_grad():
                vo = model(model_input(val["plate"], val["hint"]))
                vmse = F.mse_loss(vo[11], val["alpha"]).item()
                hmse = F.mse_loss(val["hint"], val["alpha"]).item()
            model.train()
            history.append(dict(step=step, loss=loss.item(), **parts, val_alpha_mse=vmse))
            print(f"step {step:5d} loss {loss.item():.4f} alpha {parts['alpha']:.4f} "
                  f"val alpha MSE {vmse:.5f} (hint {hmse:.5f}) [{time.time() - t1:.0f}s]", flush=True)
    t_train = time.time() - t1

    model.eval()
    pth, ts = a.out + ".pth", a.out + ".ts"
    os.makedirs(os.path.dirname(os.path.abspath(pth)), exist_ok=True)
    sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    torch.save({"state_dict": sd}, pth)
    rc = ex.main(["--arch", "tiny", "--img-size", str(a.size), "--checkpoint", pth, "--output", ts])
    info = dict(command="python tools/train_tiny.py " + " ".join(argv or sys.argv[1:]), seed=a.seed,
                size=a.size, steps=a.steps, batch=a.batch, pool=a.pool, lr=a.lr, threads=a.threads,
                data_seconds=round(t_data, 1), train_seconds=round(t_train, 1),
                total_seconds=round(time.time() - t0, 1), torch=torch.__version__, history=history)
    with open(a.out + ".train.json", "w") as f:
        json.dump(info, f, indent=1)
    print(f"trained in {t_train / 60:.1f} min (+{t_data:.0f}s data); wrote {pth}, {ts}", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
