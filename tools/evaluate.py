#!/usr/bin/env python3
"""Matte quality of the bundled model against two baselines on held-out synthetic frames.

  python tools/evaluate.py --checkpoint checkpoints/greenformer_tiny_synthetic128.pth \
      --frames 60 --json docs/metrics.json --pictures docs/

Methods: (1) the alpha hint itself, (2) a classical green-difference chroma key
alpha = 1 - clip(k * (G - max(R, B)) - b, 0, 1) with k, b chosen on separate validation
seeds, (3) the bundled GreenFormer (the reference model in tools/greenformer_ref.py with the
checkpoint's weights; the C++ engine matches it to < 1e-5, see tests).

Held-out frames come from tools/make_synthetic.py seeds starting at 1_000_000, which
training never uses. Frames are generated at the model size (128), so no resize sits between
the model and the metric. Metrics (alpha in 0..1):
  SAD   sum of |alpha - gt| per frame, in thousands of pixels (as matting papers report it)
  MSE   mean squared error
  Grad  mean |grad(alpha) - grad(gt)| (Sobel magnitude), x 1000
  FG    mean |fg - fg_gt| over pixels with gt alpha > 0 (model only: baselines have no fg)
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import greenformer_ref as gr  # noqa: E402
import make_synthetic as ms  # noqa: E402
import train_tiny as tt  # noqa: E402

HELDOUT_SEED = tt.HELDOUT_SEED_BASE


def heldout(n: int, size: int, seed: int = HELDOUT_SEED):
    """Frame i uses its own generator seeded seed + i, so any subset is reproducible alone."""
    return [ms.generate(np.random.default_rng(seed + i), size, size) for i in range(n)]


def chroma_key(plate: np.ndarray, k: float, b: float) -> np.ndarray:
    diff = plate[..., 1] - np.maximum(plate[..., 0], plate[..., 2])
    return 1.0 - np.clip(k * diff - b, 0.0, 1.0)


def sobel(a: np.ndarray) -> np.ndarray:
    t = torch.from_numpy(a.astype(np.float32))[None, None]
    kx = torch.tensor([[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]], dtype=torch.float32).view(1, 1, 3, 3) / 8
    gx = F.conv2d(F.pad(t, (1, 1, 1, 1), mode="replicate"), kx)
    gy = F.conv2d(F.pad(t, (1, 1, 1, 1), mode="replicate"), kx.transpose(2, 3))
    return torch.sqrt(gx * gx + gy * gy)[0, 0].numpy()


def metrics(alpha: np.ndarray, gt: np.ndarray) -> dict:
    d = alpha.astype(np.float64) - gt
    return dict(sad=float(np.abs(d).sum() / 1000), mse=float((d * d).mean()),
                grad=float(np.abs(sobel(alpha) - sobel(gt)).mean() * 1000))


def run_model(model, samples):
    x = torch.stack([tt.model_input(torch.from_numpy(s["plate"]).permute(2, 0, 1)[None],
                                    torch.from_numpy(s["hint"])[None, None])[0] for s in samples])
    with torch.no_grad():
        out = model(x)
    return out[11][:, 0].numpy(), out[12].permute(0, 2, 3, 1).numpy()


def fit_chroma(size: int):
    val = heldout(24, size, seed=HELDOUT_SEED - 5000)
    best = None
    for k in (1.5, 2, 3, 4, 6, 8, 12):
        for b in (-0.2, -0.1, 0.0, 0.1, 0.2):
            mse = np.mean([metrics(chroma_key(s["plate"], k, b), s["alpha"])["mse"] for s in val])
            if best is None or mse < best[0]:
                best = (mse, k, b)
    return best[1], best[2]


def picture(path: str, img: np.ndarray, scale: int = 2):
    a = np.clip(img, 0, 1)
    im = Image.fromarray((a * 255 + 0.5).astype(np.uint8))
    im.resize((im.width * scale, im.height * scale), Image.NEAREST).save(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", required=True, help=".pth written by tools/train_tiny.py")
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--json", help="write the table here")
    ap.add_argument("--pictures", help="folder for one PNG per method of held-out frame 0")
    a = ap.parse_args(argv)
    torch.set_num_threads(2)
    model = gr.build_greenformer("tiny", a.size)
    gr.load_corridorkey_pth(model, a.checkpoint)
    model.eval()
    k, b = fit_chroma(a.size)
    samples = heldout(a.frames, a.size)
    rows = {"hint": [], "chroma_key": [], "model": []}
    fg_err = []
    for i in range(0, len(samples), 16):
        chunk = samples[i:i + 16]
        alphas, fgs = run_model(model, chunk)
        for s, al, fg in zip(chunk, alphas, fgs):
            rows["hint"].append(metrics(s["hint"], s["alpha"]))
            rows["chroma_key"].append(metrics(chroma_key(s["plate"], k, b), s["alpha"]))
            rows["model"].append(metrics(al, s["alpha"]))
            w = s["alpha"] > 0
            fg_err.append(float(np.abs(fg - s["fg"])[w].mean()) if w.any() else 0.0)
    table = {m: {key: float(np.mean([r[key] for r in v])) for key in ("sad", "mse", "grad")}
             for m, v in rows.items()}
    table["model"]["fg"] = float(np.mean(fg_err))
    result = dict(frames=a.frames, size=a.size, heldout_seed=HELDOUT_SEED, chroma_key=dict(k=k, b=b),
                  checkpoint=os.path.basename(a.checkpoint), metrics=table)
    print(f"{'method':12s} {'SAD':>8s} {'MSE':>9s} {'Grad':>8s} {'FG':>8s}   ({a.frames} held-out frames, {a.size}px)")
    for m, v in table.items():
        print(f"{m:12s} {v['sad']:8.3f} {v['mse']:9.5f} {v['grad']:8.3f} {v.get('fg', float('nan')):8.4f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    if a.pictures:
        os.makedirs(a.pictures, exist_ok=True)
        s = samples[0]
        al, _ = run_model(model, [s])
        picture(f"{a.pictures}/eval_plate.png", s["plate"])
        picture(f"{a.pictures}/eval_truth.png", s["alpha"])
        picture(f"{a.pictures}/eval_hint.png", s["hint"])
        picture(f"{a.pictures}/eval_chroma_key.png", chroma_key(s["plate"], k, b))
        picture(f"{a.pictures}/eval_model.png", al[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
