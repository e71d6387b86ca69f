#!/usr/bin/env python3
"""Matte quality of a checkpoint against two baselines (the alpha hint itself and a classic
chroma key), at default settings, on clips with ground truth.

  # 1. the held-out family (plants over panel screens, never trained on) as two clips:
  #    32 sRGB PNG frames and 32 scene-linear EXR frames, 640x360
  python tools/evaluate.py --make-heldout /tmp/ck_eval --frames 64 --size 640x360
  # 2. the reference forward (tools/greenformer_ref.py, float32) at the checkpoint's img_size
  python tools/evaluate.py --checkpoint checkpoints/greenformer_small_synthetic384.pth \
      --clip /tmp/ck_eval/heldout_srgb --clip /tmp/ck_eval/heldout_linear --clip samples/greenscreen_demo \
      --json docs/metrics.json --pictures docs/
  # 3. or score what the C++ engine wrote (Output/Matte/*.exr) after
  #    `corridorkey-engine inference CLIP` (add --linear for EXR plates)
  python tools/evaluate.py --engine --clip /tmp/ck_eval/heldout_srgb ... --json docs/metrics_engine.json

A clip is a folder with Input/ (PNG = sRGB plates, EXR = scene-linear plates), AlphaHint/ and
GT/alpha/ (16-bit PNG), as tools/make_synthetic.py writes them. The reference path does what
the engine does at its defaults: antialiased bilinear resize of plate and hint to S x S (S =
the checkpoint's img_size), linear -> sRGB after the resize for EXR plates, the model, then a
Lanczos-4 resize of the alpha back to the frame size (OpenCV), scored at the frame size.

Methods: the hint as the matte; a green-difference chroma key
alpha = 1 - clip(k * (G - max(R, B)) - b, 0, 1) on the sRGB plate at full resolution, k and b
fitted for MSE on training-family frames (never the held-out family); the model.
Metrics (alpha in 0..1, per frame, averaged over frames):
  SAD   sum |alpha - gt| / 1000
  MSE   mean (alpha - gt)^2
  Grad  sum (|grad alpha| - |grad gt|)^2 / 1000, Gaussian-derivative filters, sigma 1.4
  Conn  connectivity error / 1000 (threshold step 0.1, 4-connected largest component)
  (Grad and Conn as in Rhemann et al. 2009 / the Deep Image Matting evaluation, over the
  whole frame instead of a trimap's unknown region.)
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import zipfile

import numpy as np
import torch

os.environ.setdefault("OPENCV_IO_ENABLE_OPENEXR", "1")
import cv2  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import greenformer_ref as gr  # noqa: E402
import make_synthetic as ms  # noqa: E402
import train_tiny as tt  # noqa: E402

HELDOUT_SEED = tt.HELDOUT_SEED_BASE
CHROMA_FIT_SEED = HELDOUT_SEED - 5000  # training-family frames for fitting the chroma key


# ---------------------------------------------------------------------------------------
# Metrics

def _gauss_grad(a: np.ndarray, sigma: float = 1.4) -> np.ndarray:
    r = int(np.ceil(3 * sigma))
    x = np.arange(-r, r + 1, dtype=np.float64)
    g = np.exp(-x * x / (2 * sigma * sigma))
    g /= g.sum()
    dg = -x * g / (sigma * sigma)
    dg /= np.abs(dg).sum() / 2
    gx = cv2.sepFilter2D(a, cv2.CV_64F, dg, g, borderType=cv2.BORDER_REPLICATE)
    gy = cv2.sepFilter2D(a, cv2.CV_64F, g, dg, borderType=cv2.BORDER_REPLICATE)
    return np.sqrt(gx * gx + gy * gy)


def connectivity(pred: np.ndarray, gt: np.ndarray, step: float = 0.1) -> float:
    steps = np.arange(0, 1 + step, step)
    l_map = np.full(gt.shape, -1.0)
    for i in range(1, len(steps)):
        inter = ((pred >= steps[i]) & (gt >= steps[i])).astype(np.uint8)
        n, labels, stats, _ = cv2.connectedComponentsWithStats(inter, connectivity=4)
        omega = np.zeros(gt.shape, bool)
        if n > 1:
            omega = labels == (1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA])))
        l_map[(l_map == -1) & ~omega] = steps[i - 1]
    l_map[l_map == -1] = 1
    d_pred, d_gt = pred - l_map, gt - l_map
    phi_pred = 1 - d_pred * (d_pred >= 0.15)
    phi_gt = 1 - d_gt * (d_gt >= 0.15)
    return float(np.abs(phi_pred - phi_gt).sum() / 1000)


def metrics(alpha: np.ndarray, gt: np.ndarray) -> dict:
    a = alpha.astype(np.float64)
    t = gt.astype(np.float64)
    d = a - t
    grad = ((_gauss_grad(a) - _gauss_grad(t)) ** 2).sum() / 1000
    return dict(sad=float(np.abs(d).sum() / 1000), mse=float((d * d).mean()), grad=float(grad),
                conn=connectivity(np.clip(a, 0, 1), t))


# ---------------------------------------------------------------------------------------
# Clips

def read_image(path: str) -> np.ndarray:
    im = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    if im is None:
        raise SystemExit(f"cannot read {path}")
    if im.dtype == np.uint8:
        im = im.astype(np.float32) / 255
    elif im.dtype == np.uint16:
        im = im.astype(np.float32) / 65535
    else:
        im = im.astype(np.float32)
    if im.ndim == 3:
        im = im[..., 2::-1] if im.shape[2] >= 3 else im[..., 0]  # BGR(A) -> RGB
    return np.ascontiguousarray(im)


def clip_frames(clip: str):
    inputs = sorted(glob.glob(f"{clip}/Input/*"))
    if not inputs:
        raise SystemExit(f"{clip}: no Input/ frames")
    for p in inputs:
        stem = os.path.splitext(os.path.basename(p))[0]
        plate = read_image(p)
        hint = read_image(glob.glob(f"{clip}/AlphaHint/{stem}.*")[0])
        if hint.ndim == 3:
            hint = hint.max(axis=2)
        gt = read_image(f"{clip}/GT/alpha/{stem}.png")
        yield stem, plate, hint, gt, p.lower().endswith(".exr")


def make_heldout(out: str, frames: int, w: int, h: int):
    """Held-out family frames as two clips: even seeds sRGB PNG, odd seeds linear EXR; the
    hint kinds cycle so each kind is in both."""
    for i in range(frames):
        color = "srgb" if i % 2 == 0 else "linear"
        d = f"{out}/heldout_{color}"
        for sub in ("Input", "AlphaHint", "GT/alpha", "GT/fg"):
            os.makedirs(f"{d}/{sub}", exist_ok=True)
        kind = ms.HINT_KINDS[(i // 2) % len(ms.HINT_KINDS)]
        s = ms.generate(np.random.default_rng(HELDOUT_SEED + i), h, w, heldout=True, color=color, hint_kind=kind)
        ms.write_sample(d, f"frame_{i // 2 + 1:04d}", s)
    print(f"wrote {frames} held-out frames ({w}x{h}) to {out}/heldout_srgb and {out}/heldout_linear")


def fit_chroma(w: int, h: int, n: int = 24):
    """k, b of the chroma key with the lowest MSE on training-family frames (both colour paths)."""
    val = []
    for i in range(n):
        s = ms.generate(np.random.default_rng(CHROMA_FIT_SEED + i), h, w, color="srgb" if i % 2 == 0 else "linear")
        val.append((ms.linear_to_srgb(s["plate"]) if s["linear"] else s["plate"], s["alpha"]))
    best = None
    for k in (1.5, 2, 3, 4, 6, 8, 12):
        for b in (-0.2, -0.1, 0.0, 0.1, 0.2):
            mse = np.mean([metrics(ms.chroma_alpha(p, k, b).numpy(), a)["mse"] for p, a in val])
            if best is None or mse < best[0]:
                best = (mse, k, b)
    return best[1], best[2]


# ---------------------------------------------------------------------------------------
# The model, as the engine runs it at its defaults

def checkpoint_config(path: str):
    """(arch config dict, img_size) from the .ts archive beside a .pth (its config.json), or
    from the .ts itself."""
    stem = os.path.splitext(path)[0]
    ts = path if path.endswith(".ts") else stem + ".ts"
    with zipfile.ZipFile(ts) as z:
        name = next(n for n in z.namelist() if n.endswith("extra/config.json"))
        cfg = json.loads(z.read(name))
    return cfg, int(cfg["img_size"])


def load_model(path: str, img_size: int = 0):
    cfg, size = checkpoint_config(path)
    size = img_size or size
    model = gr.build_greenformer(cfg, size)
    pth = path if path.endswith(".pth") else os.path.splitext(path)[0] + ".pth"
    gr.load_corridorkey_pth(model, pth)
    return model.eval(), size


def run_model(model, size: int, plate: np.ndarray, hint: np.ndarray, linear: bool) -> np.ndarray:
    h, w = hint.shape
    v = ms.model_view(dict(plate=plate, hint=hint, alpha=hint, fg=np.zeros_like(plate),
                           background=np.zeros_like(plate), linear=linear), size)
    with torch.no_grad():
        out = model(tt.model_input(v["plate"][None], v["hint"][None]))
    a = out[11][0, 0].numpy()
    return cv2.resize(a, (w, h), interpolation=cv2.INTER_LANCZOS4)


def engine_matte(clip: str, stem: str) -> np.ndarray:
    return read_image(f"{clip}/Output/Matte/{stem}.exr")


# ---------------------------------------------------------------------------------------

def strip(img: np.ndarray) -> np.ndarray:
    a = np.clip(img, 0, 1)
    return np.repeat(a[..., None], 3, 2) if a.ndim == 2 else a


def panel(x: np.ndarray, label: str, width: int = 320) -> np.ndarray:
    """One labelled 8-bit BGR picture panel `width` wide (docs/ strips)."""
    h = int(round(width * x.shape[0] / x.shape[1]))
    im = cv2.resize(strip(x), (width, h), interpolation=cv2.INTER_AREA)
    im = (im * 255 + 0.5).astype(np.uint8)[..., ::-1].copy()
    for colour, thick in (((0, 0, 0), 3), ((255, 255, 255), 1)):
        cv2.putText(im, label, (6, 16), cv2.FONT_HERSHEY_SIMPLEX, 0.45, colour, thick, cv2.LINE_AA)
    return im


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--make-heldout", metavar="DIR", help="write the held-out family clips here and exit")
    ap.add_argument("--frames", type=int, default=64)
    ap.add_argument("--size", default="640x360", help="WxH of the held-out frames")
    ap.add_argument("--checkpoint", help=".pth written by tools/train_tiny.py (its .ts beside it gives the config)")
    ap.add_argument("--img-size", type=int, default=0, help="0: the checkpoint's own (the engine's default)")
    ap.add_argument("--engine", action="store_true", help="score <clip>/Output/Matte/*.exr written by the engine")
    ap.add_argument("--clip", action="append", default=[], help="clip folder with GT/alpha (repeatable)")
    ap.add_argument("--chroma", help="k,b for the chroma key (default: fitted on training-family frames)")
    ap.add_argument("--json", help="write the table here")
    ap.add_argument("--pictures", help="folder for one PNG strip per clip (plate, hint, chroma key, model, truth)")
    a = ap.parse_args(argv)
    torch.set_num_threads(2)
    w, h = (int(v) for v in a.size.lower().split("x"))
    if a.make_heldout:
        make_heldout(a.make_heldout, a.frames, w, h)
        return 0
    if not a.clip or (not a.engine and not a.checkpoint):
        ap.error("--clip and one of --checkpoint / --engine are needed")
    model, size = load_model(a.checkpoint, a.img_size) if a.checkpoint else (None, 0)
    k, b = (float(v) for v in a.chroma.split(",")) if a.chroma else fit_chroma(w, h)
    result = dict(source="engine Output/Matte" if a.engine else f"reference forward at img_size {size}",
                  checkpoint=os.path.basename(a.checkpoint) if a.checkpoint else None,
                  chroma_key=dict(k=k, b=b), clips={})
    print(f"{result['source']}; chroma key k={k} b={b}")
    print(f"{'clip':28s} {'method':11s} {'SAD':>8s} {'MSE':>9s} {'Grad':>8s} {'Conn':>8s}")
    pooled = {}
    for clip in a.clip:
        rows = {"hint": [], "chroma_key": [], "model": []}
        first = None
        name = os.path.basename(os.path.normpath(clip))
        for stem, plate, hint, gt, linear in clip_frames(clip):
            srgb = ms.linear_to_srgb(plate) if linear else plate
            key = ms.chroma_alpha(srgb, k, b).numpy()
            al = engine_matte(clip, stem) if a.engine else run_model(model, size, plate, hint, linear)
            rows["hint"].append(metrics(hint, gt))
            rows["chroma_key"].append(metrics(key, gt))
            rows["model"].append(metrics(al, gt))
            if first is None:
                first = (srgb, hint, key, al, gt)
        table = {m: {q: float(np.mean([r[q] for r in v])) for q in ("sad", "mse", "grad", "conn")}
                 for m, v in rows.items()}
        result["clips"][name] = dict(frames=len(rows["model"]), metrics=table)
        for m, v in rows.items():
            pooled.setdefault(name.split("_")[0], {}).setdefault(m, []).extend(v)
            t = table[m]
            print(f"{name:28s} {m:11s} {t['sad']:8.3f} {t['mse']:9.5f} {t['grad']:8.3f} {t['conn']:8.3f}")
        if a.pictures:
            os.makedirs(a.pictures, exist_ok=True)
            tag = "engine" if a.engine else "reference"
            labels = ("plate (sRGB)", "hint", "chroma key", "model" + (" (engine)" if a.engine else ""), "truth")
            panels = [panel(x, label) for x, label in zip(first, labels)]
            cv2.imwrite(f"{a.pictures}/eval_{name}_{tag}.png", np.concatenate(panels, 1))
    result["pooled"] = {}
    for group, rows in pooled.items():
        if sum(1 for c in result["clips"] if c.split("_")[0] == group) < 2:
            continue
        table = {m: {q: float(np.mean([r[q] for r in v])) for q in ("sad", "mse", "grad", "conn")}
                 for m, v in rows.items()}
        result["pooled"][group] = dict(frames=len(rows["model"]), metrics=table)
        for m, t in table.items():
            print(f"{group + ' (all)':28s} {m:11s} {t['sad']:8.3f} {t['mse']:9.5f} {t['grad']:8.3f} {t['conn']:8.3f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
