#!/usr/bin/env python3
"""Issue 15's test clip, made without tools/make_synthetic.py (numpy + OpenCV only):
scene-linear EXR plates of a soft-edged disc with thin strands moving over an uneven green
screen, a blurred hint, and the true alpha.

  python tools/make_disc_clip.py --out /tmp/disc_clip --frames 24 --size 640x360
  corridorkey-engine inference /tmp/disc_clip --linear          # defaults otherwise
  python tools/evaluate.py --engine --clip /tmp/disc_clip

Rendering: coverage is supersampled 4x4 per pixel (box filter); colours are composited in
linear light (plate = alpha * fg + (1 - alpha) * screen), then a little sensor noise. The
hint is the true alpha thresholded at 0.5 and blurred (Gaussian, sigma 6 px), as a quick
garbage key would give. Layout: Input/*.exr (half RGB), AlphaHint/*.png, GT/alpha/*.png
(16-bit), GT/fg/*.png.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

os.environ.setdefault("OPENCV_IO_ENABLE_OPENEXR", "1")
import cv2  # noqa: E402

SS = 4  # supersampling per axis


def srgb_to_linear(x):
    return np.where(x <= 0.04045, x / 12.92, ((x + 0.055) / 1.055) ** 2.4)


def render(w: int, h: int, t: float, strands, rng):
    W, H = w * SS, h * SS
    ys, xs = np.mgrid[0:H, 0:W].astype(np.float32)
    xs, ys = (xs + 0.5) / SS, (ys + 0.5) / SS
    cx, cy, r = w * (0.4 + 0.2 * t), h * (0.5 + 0.05 * np.sin(6.28 * t)), 0.22 * h
    d = np.hypot(xs - cx, ys - cy)
    disc = np.clip((r - d) / 6.0 + 0.5, 0, 1)  # a soft edge, 6 px wide
    hair = np.zeros_like(disc)
    for ang, length, width, curve in strands:
        # a strand: points along an arc leaving the disc's edge; distance by sampling
        ts = np.linspace(0, 1, 64)
        a = ang + curve * ts
        px = cx + np.cos(a) * (r * 0.9 + length * ts)
        py = cy + np.sin(a) * (r * 0.9 + length * ts)
        x0, x1 = int(max(0, (px.min() - 3) * SS)), int(min(W, (px.max() + 3) * SS))
        y0, y1 = int(max(0, (py.min() - 3) * SS)), int(min(H, (py.max() + 3) * SS))
        if x1 <= x0 or y1 <= y0:
            continue
        bx, by = xs[y0:y1, x0:x1, None], ys[y0:y1, x0:x1, None]
        dist = np.sqrt((bx - px) ** 2 + (by - py) ** 2).min(axis=2)
        hair[y0:y1, x0:x1] = np.maximum(hair[y0:y1, x0:x1], (dist <= width / 2).astype(np.float32))
    alpha_ss = 1 - (1 - disc) * (1 - hair)
    alpha = cv2.resize(alpha_ss, (w, h), interpolation=cv2.INTER_AREA)
    hair_cov = cv2.resize(hair, (w, h), interpolation=cv2.INTER_AREA)
    disc_cov = cv2.resize(disc, (w, h), interpolation=cv2.INTER_AREA)
    return alpha, hair_cov, disc_cov


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--frames", type=int, default=24)
    ap.add_argument("--size", default="640x360")
    ap.add_argument("--seed", type=int, default=15)
    a = ap.parse_args(argv)
    w, h = (int(v) for v in a.size.split("x"))
    rng = np.random.default_rng(a.seed)
    for d in ("Input", "AlphaHint", "GT/alpha", "GT/fg"):
        os.makedirs(f"{a.out}/{d}", exist_ok=True)
    strands = [(rng.uniform(0, 2 * np.pi), rng.uniform(0.1, 0.3) * h, rng.uniform(0.5, 1.6), rng.uniform(-0.4, 0.4))
               for _ in range(30)]
    # uneven screen: smooth random field (bicubic-upsampled grid) around a green, linear light
    grid = rng.uniform(0.7, 1.3, (5, 8)).astype(np.float32)
    light = cv2.resize(grid, (w, h), interpolation=cv2.INTER_CUBIC)
    ramp = np.linspace(0.85, 1.15, w, dtype=np.float32)[None, :]
    screen = srgb_to_linear(np.array([0.2, 0.62, 0.25], np.float32))[None, None] * (light * ramp)[..., None]
    disc_col = srgb_to_linear(np.array([0.75, 0.45, 0.35], np.float32))
    hair_col = srgb_to_linear(np.array([0.35, 0.22, 0.12], np.float32))
    for i in range(a.frames):
        alpha, hair_cov, disc_cov = render(w, h, i / max(1, a.frames - 1), strands, rng)
        # straight fg colour: the disc's, the hair's where only hair covers
        wt = np.clip(hair_cov - disc_cov, 0, 1) / np.maximum(alpha, 1e-4)
        fg = disc_col[None, None] * (1 - wt[..., None]) + hair_col[None, None] * wt[..., None]
        plate = alpha[..., None] * fg + (1 - alpha[..., None]) * screen
        plate = np.clip(plate + rng.normal(0, 0.004, plate.shape), 0, None).astype(np.float32)
        hint = cv2.GaussianBlur((alpha > 0.5).astype(np.float32), (0, 0), 6.0)
        name = f"frame_{i + 1:04d}"
        cv2.imwrite(f"{a.out}/Input/{name}.exr", np.ascontiguousarray(plate[..., ::-1]),
                    [cv2.IMWRITE_EXR_TYPE, cv2.IMWRITE_EXR_TYPE_HALF])
        cv2.imwrite(f"{a.out}/AlphaHint/{name}.png", (hint * 255 + 0.5).astype(np.uint8))
        cv2.imwrite(f"{a.out}/GT/alpha/{name}.png", (alpha * 65535 + 0.5).astype(np.uint16))
        fg8 = np.clip(np.where(fg <= 0.0031308, fg * 12.92, 1.055 * fg ** (1 / 2.4) - 0.055), 0, 1)
        cv2.imwrite(f"{a.out}/GT/fg/{name}.png", (fg8[..., ::-1] * 255 + 0.5).astype(np.uint8))
    print(f"wrote {a.frames} frames {w}x{h} to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
