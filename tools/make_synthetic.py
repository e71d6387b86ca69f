#!/usr/bin/env python3
"""Procedural green-screen data with ground truth, seeded and reproducible.

Each sample is rendered in scene-linear light at the frame size (W x H), then delivered the
way the engine is fed: an sRGB plate (8-bit, maybe JPEG-compressed) or a scene-linear plate
(float, as EXR holds it), plus a user-style alpha hint and the ground truth (true coverage
alpha and the clean, spill-free foreground colour).

Foreground families (`FAMILIES`; one is held out of training, see below):
  blob     soft-edged textured ellipses / polygons / superellipses, some with holes
  figure   a person-like silhouette (head, neck, torso, arms) with hair
  fur      a furry shape: hundreds of short strands along its edge, 0.3-2 px wide
  hair     long hair strands of many widths (0.25-4 px), straight, wavy or curly
  lines    thin lines: wires, rods, rigging, 0.3-4 px wide, across the frame
  cloth    semi-transparent cloth with folds (opacity 0.1-0.85)
  smoke    smoke / steam: fractal transparency
  plant    HELD OUT: branching stems with pointed leaves and petioles
Screen families (`SCREENS`):
  flat, uneven (blotchy lighting), graded (two tones across the frame), creased
  (wrinkles, folds), each with optional tracking markers and the subject's cast shadow;
  panels   HELD OUT: a screen of painted panels with seams and a light hot-spot
The held-out family (plant shapes over panel screens) is never rendered by training
(`generate(..., heldout=False)`, the default); tools/evaluate.py keys it.

On top: motion blur, defocus, green (or blue) spill near edges and on thin or translucent
structures plus ambient spill, exposure changes (scene-linear values above 1), sensor noise
and film grain (signal-dependent, sometimes spatially correlated), 8-bit quantisation and
JPEG compression (4:2:0) for sRGB plates, half-float rounding for linear ones.

Hints (`make_hint`), made at the frame size like a user's: blurred threshold, eroded /
dilated binary, blurred alpha, chroma-key-derived (with a garbage matte), rough roto shapes;
sometimes with holes, blocky (low-resolution), shifted by a few pixels (lagging) or with
lowered levels.

Blue screens: `--screen blue` renders blue-screen plates (blue spill). The bundled model keys
green; a blue-screen plate with G and B swapped is a green-screen plate, which is how
training uses a share of them (`generate(..., screen_color="blue", swap_gb=True)`).

  # a clip in the engine's layout (Input/, AlphaHint/) plus GT/alpha, GT/fg
  python tools/make_synthetic.py --out samples/greenscreen_demo --frames 16 --size 320x180 --seed 7 --clip
  # independent frames from the held-out family, as scene-linear EXR plates
  python tools/make_synthetic.py --out /tmp/heldout --frames 64 --size 640x360 --seed 1000000 --heldout --color linear

`generate(rng, h, w, ...)` is imported by tools/train_tiny.py and tools/evaluate.py;
`model_view(sample, S)` turns a sample into what the model sees at img_size S (the engine's
pre-processing: antialiased bilinear resize to S x S, then linear -> sRGB for linear plates).
"""

from __future__ import annotations

import argparse
import io
import math
import os
import sys
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

FAMILIES = ("blob", "figure", "fur", "hair", "lines", "cloth", "smoke", "plant")
TRAIN_FAMILIES = ("blob", "figure", "fur", "hair", "lines", "cloth", "smoke")
FAMILY_WEIGHTS = (0.14, 0.18, 0.15, 0.21, 0.1, 0.11, 0.11)
SCREENS = ("flat", "uneven", "graded", "creased", "panels")
TRAIN_SCREENS = ("flat", "uneven", "graded", "creased")
HELDOUT_FAMILY = "plant"
HELDOUT_SCREEN = "panels"


# ---------------------------------------------------------------------------------------
# Colour

def srgb_to_linear(x):
    if isinstance(x, np.ndarray):
        x = np.clip(x, 0, None)
        return np.where(x <= 0.04045, x / 12.92, ((x + 0.055) / 1.055) ** 2.4).astype(np.float32)
    x = x.clamp_min(0)
    return torch.where(x <= 0.04045, x / 12.92, ((x + 0.055) / 1.055) ** 2.4)


def linear_to_srgb(x):
    """The engine's conversion (engine/src/runtime/frame_tensors.cpp): no clamp above 1."""
    if isinstance(x, np.ndarray):
        x = np.clip(x, 0, None)
        return np.where(x <= 0.0031308, x * 12.92, 1.055 * x ** (1 / 2.4) - 0.055).astype(np.float32)
    x = x.clamp_min(0)
    return torch.where(x <= 0.0031308, x * 12.92, 1.055 * x.pow(1 / 2.4) - 0.055)


def hsv(h: float, s: float, v: float) -> np.ndarray:
    h = h % 1.0
    i = int(h * 6) % 6
    f = h * 6 - int(h * 6)
    p, q, t = v * (1 - s), v * (1 - f * s), v * (1 - (1 - f) * s)
    return np.array([(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)][i], np.float32)


def fg_colour(rng: np.random.Generator, kind: str = "any") -> np.ndarray:
    """An sRGB foreground colour: skin, hair, clothing, greys; greens are rare and muted."""
    r = rng.random()
    if kind == "skin" or (kind == "any" and r < 0.15):
        return hsv(rng.uniform(0.02, 0.09), rng.uniform(0.25, 0.6), rng.uniform(0.3, 0.95))
    if kind == "hair" or (kind == "any" and r < 0.3):
        return [hsv(rng.uniform(0.05, 0.12), rng.uniform(0.3, 0.7), rng.uniform(0.08, 0.8)),
                hsv(0, 0, rng.uniform(0.05, 0.9))][int(rng.random() < 0.25)]
    if kind == "any" and r < 0.45:
        return hsv(0, 0, rng.uniform(0.03, 0.97))  # black .. white
    if kind == "any" and r < 0.5:  # muted green / olive / teal: the hard cases, kept rare
        return hsv(rng.uniform(0.17, 0.5), rng.uniform(0.1, 0.45), rng.uniform(0.2, 0.7))
    hue = rng.choice([rng.uniform(0.0, 0.16), rng.uniform(0.5, 1.0)])
    return hsv(hue, rng.uniform(0.15, 0.95), rng.uniform(0.2, 0.97))


# ---------------------------------------------------------------------------------------
# Small image helpers (torch on CPU, [C,H,W] or [H,W] float32)

def _as4(x: torch.Tensor) -> torch.Tensor:
    return x[None, None] if x.dim() == 2 else x[None]


def _from4(y: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return y[0, 0] if like.dim() == 2 else y[0]


def blur(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """Separable Gaussian, reflect padding; large sigmas run on a downsampled copy."""
    if sigma <= 0.15:
        return x
    y = _as4(x)
    h, w = y.shape[-2:]
    f = int(sigma // 4) if sigma > 8 else 1
    if f > 1:
        y = F.interpolate(y, size=(max(2, h // f), max(2, w // f)), mode="area")
        sigma = sigma / f
    r = max(1, int(math.ceil(3 * sigma)))
    r = min(r, y.shape[-1] - 1, y.shape[-2] - 1)
    k = torch.exp(-0.5 * (torch.arange(-r, r + 1, dtype=torch.float32) / sigma) ** 2)
    k = k / k.sum()
    c = y.shape[1]
    y = F.conv2d(F.pad(y, (r, r, 0, 0), mode="reflect"), k.view(1, 1, 1, -1).repeat(c, 1, 1, 1), groups=c)
    y = F.conv2d(F.pad(y, (0, 0, r, r), mode="reflect"), k.view(1, 1, -1, 1).repeat(c, 1, 1, 1), groups=c)
    if f > 1:
        y = F.interpolate(y, size=(h, w), mode="bilinear", align_corners=False)
    return _from4(y, x)


def morph(mask: torch.Tensor, radius: int) -> torch.Tensor:
    """Dilate (radius > 0) or erode (radius < 0) a [H,W] mask with a square element."""
    if radius == 0:
        return mask
    k, r = 2 * abs(radius) + 1, abs(radius)
    y = _as4(mask) if radius > 0 else -_as4(mask)
    y = F.max_pool2d(F.max_pool2d(y, (k, 1), 1, (r, 0)), (1, k), 1, (0, r))  # separable square
    return _from4(y if radius > 0 else -y, mask)


def shift(x: torch.Tensor, dx: float, dy: float) -> torch.Tensor:
    """Translate by (dx, dy) pixels (bilinear; zeros come in)."""
    if abs(dx) < 1e-6 and abs(dy) < 1e-6:
        return x
    y = _as4(x)
    h, w = y.shape[-2:]
    theta = torch.tensor([[[1, 0, -2 * dx / w], [0, 1, -2 * dy / h]]], dtype=torch.float32)
    grid = F.affine_grid(theta, list(y.shape), align_corners=False)
    return _from4(F.grid_sample(y, grid, mode="bilinear", padding_mode="zeros", align_corners=False), x)


def directional_blur(x: torch.Tensor, length: float, angle: float) -> torch.Tensor:
    """Motion blur: mean of copies shifted along `angle` over `length` pixels."""
    n = int(math.ceil(length))
    if n <= 1:
        return x
    y = _as4(x)
    h, w = y.shape[-2:]
    acc = torch.zeros_like(y)
    base = F.affine_grid(torch.eye(2, 3)[None], list(y.shape), align_corners=False)
    for i in range(n):
        t = (i / (n - 1) - 0.5) * length
        off = torch.tensor([t * math.cos(angle) * 2 / w, t * math.sin(angle) * 2 / h])
        acc += F.grid_sample(y, base + off, mode="bilinear", padding_mode="border", align_corners=False)
    return _from4(acc / n, x)


def smooth_noise(g: torch.Generator, h: int, w: int, scale: float, channels: int = 1) -> torch.Tensor:
    """Low-frequency noise in 0..1 with features about `scale` pixels apart."""
    gh, gw = max(2, int(round(h / scale)) + 1), max(2, int(round(w / scale)) + 1)
    n = torch.rand((1, channels, gh, gw), generator=g)
    up = F.interpolate(n, size=(h, w), mode="bicubic", align_corners=False).clamp(0, 1)[0]
    return up if channels > 1 else up[0]


def fbm(g: torch.Generator, h: int, w: int, scale: float, octaves: int = 4) -> torch.Tensor:
    acc, amp, tot = torch.zeros(h, w), 1.0, 0.0
    for _ in range(octaves):
        acc += amp * smooth_noise(g, h, w, max(1.5, scale))
        tot += amp
        amp *= 0.55
        scale /= 2
    return acc / tot


def resize(x: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """The engine's pre-processing resize: bilinear, align_corners=False, antialias."""
    y = _as4(x)
    if tuple(y.shape[-2:]) == (h, w):
        return x
    return _from4(F.interpolate(y, size=(h, w), mode="bilinear", align_corners=False, antialias=True), x)


class Canvas:
    def __init__(self, h: int, w: int):
        self.h, self.w = h, w
        ys, xs = torch.meshgrid(torch.arange(h, dtype=torch.float32) + 0.5,
                                torch.arange(w, dtype=torch.float32) + 0.5, indexing="ij")
        self.xs, self.ys = xs, ys
        self.m = float(min(h, w))
        self.P = torch.zeros(3, h, w)   # premultiplied linear colour
        self.A = torch.zeros(h, w)

    def over(self, a: torch.Tensor, c: torch.Tensor, box=None):
        """Composite a layer (coverage a, linear straight colour c [3] or [3,h,w]) on top."""
        if box is None:
            box = (0, self.h, 0, self.w)
        y0, y1, x0, x1 = box
        if c.dim() == 1:
            c = c.view(3, 1, 1)
        P, A = self.P[:, y0:y1, x0:x1], self.A[y0:y1, x0:x1]
        P.mul_(1 - a).add_(c * a)
        A.mul_(1 - a).add_(a)


def cov_from_distance(d: torch.Tensor, softness: float) -> torch.Tensor:
    """Coverage from a signed distance in pixels (negative inside): a ramp `softness` wide."""
    return (0.5 - d / max(softness, 0.5)).clamp(0, 1)


def line_cov(dist: torch.Tensor, width: float) -> torch.Tensor:
    """Pixel coverage of a line `width` px wide at distance `dist` from its centre: the
    overlap of the pixel's footprint [d-0.5, d+0.5] with [-w/2, w/2] (exact integral = w)."""
    return (torch.minimum(dist + 0.5, torch.full_like(dist, width / 2))
            - torch.maximum(dist - 0.5, torch.full_like(dist, -width / 2))).clamp(0, 1)


def bezier(pts: np.ndarray, n: int) -> np.ndarray:
    t = np.linspace(0, 1, n, dtype=np.float32)[:, None]
    p = pts
    return ((1 - t) ** 3) * p[0] + 3 * ((1 - t) ** 2) * t * p[1] + 3 * (1 - t) * t * t * p[2] + t ** 3 * p[3]


def polyline_distance(cv: Canvas, poly: np.ndarray, pad: float):
    """Distance from each pixel in the polyline's bounding box (+pad) to the polyline.
    Returns (dist [bh,bw], box) or (None, None) when the box is off the canvas."""
    x0 = int(max(0, math.floor(poly[:, 0].min() - pad)))
    y0 = int(max(0, math.floor(poly[:, 1].min() - pad)))
    x1 = int(min(cv.w, math.ceil(poly[:, 0].max() + pad)))
    y1 = int(min(cv.h, math.ceil(poly[:, 1].max() + pad)))
    if x1 <= x0 or y1 <= y0:
        return None, None
    a, b = torch.from_numpy(poly[:-1]), torch.from_numpy(poly[1:])
    q = torch.stack([cv.xs[y0:y1, x0:x1], cv.ys[y0:y1, x0:x1]], -1).view(-1, 1, 2)
    best = torch.full((q.shape[0],), float("inf"))
    ab = b - a
    den = (ab * ab).sum(-1).clamp_min(1e-6)
    for i in range(0, a.shape[0], 32):  # chunks of segments bound the memory
        aa, abc, dd = a[i:i + 32][None], ab[i:i + 32][None], den[i:i + 32][None]
        t = (((q - aa) * abc).sum(-1) / dd).clamp(0, 1)
        dist = (q - (aa + t[..., None] * abc)).norm(dim=-1).min(dim=1).values
        best = torch.minimum(best, dist)
    return best.view(y1 - y0, x1 - x0), (y0, y1, x0, x1)


def draw_strand(cv: Canvas, pts: np.ndarray, width, colour: torch.Tensor, opacity: float, n: int = 40):
    """A curve through Bezier control points; width may taper (w0, w1)."""
    poly = bezier(pts, n) if len(pts) == 4 else pts
    w0, w1 = (width, width) if np.isscalar(width) else width
    dist, box = polyline_distance(cv, poly, max(w0, w1) / 2 + 1.5)
    if dist is None:
        return
    if abs(w0 - w1) < 1e-3:
        a = line_cov(dist, w0)
    else:  # taper: width by the nearest control point's parameter (approx.)
        y0, y1, x0, x1 = box
        q = torch.stack([cv.xs[y0:y1, x0:x1], cv.ys[y0:y1, x0:x1]], -1).view(-1, 1, 2)
        idx = (q - torch.from_numpy(poly)[None]).norm(dim=-1).argmin(dim=1).float() / (len(poly) - 1)
        wmap = (w0 + (w1 - w0) * idx).view(dist.shape)
        a = (torch.minimum(dist + 0.5, wmap / 2) - torch.maximum(dist - 0.5, -wmap / 2)).clamp(0, 1)
    cv.over(a * opacity, colour, box)


# ---------------------------------------------------------------------------------------
# Foreground families. Each draws onto the canvas (linear light) in painter's order.

def _texture(g, cv: Canvas, base: np.ndarray, scale: float, amount: float, fine: float = 0.03) -> torch.Tensor:
    lin = torch.from_numpy(srgb_to_linear(base)).view(3, 1, 1)
    # mostly luminance texture, a little chroma (a print, stains), not a rainbow
    tex = (1 + amount * (2 * smooth_noise(g, cv.h, cv.w, scale) - 1))[None] \
        * (1 + 0.25 * amount * (2 * smooth_noise(g, cv.h, cv.w, scale * 2, 3) - 1))
    light = 1 + 0.35 * (2 * smooth_noise(g, cv.h, cv.w, cv.m / 2) - 1)  # broad shading
    out = lin * tex * light + fine * lin * torch.randn((3, cv.h, cv.w), generator=g)
    return out.clamp_min(0)


def _shape_distance(cv: Canvas, kind: str, cx, cy, rx, ry, ang, verts=None, p=4.0) -> torch.Tensor:
    c, s = math.cos(ang), math.sin(ang)
    u = ((cv.xs - cx) * c + (cv.ys - cy) * s) / rx
    v = (-(cv.xs - cx) * s + (cv.ys - cy) * c) / ry
    m = min(rx, ry)
    if kind == "ellipse":
        return (torch.sqrt(u * u + v * v) - 1.0) * m
    if kind == "superellipse":
        r = (u.abs() ** p + v.abs() ** p).clamp_min(1e-9) ** (1 / p)
        return (r - 1.0) * m
    ang_p = torch.atan2(v, u)
    vang = np.arctan2(verts[:, 1], verts[:, 0])
    vrad = np.hypot(verts[:, 0], verts[:, 1])
    order = np.argsort(vang)
    vang = np.concatenate([vang[order] - 2 * np.pi, vang[order], vang[order] + 2 * np.pi])
    vrad = np.concatenate([vrad[order]] * 3)
    rad = torch.from_numpy(np.interp(ang_p.numpy().ravel(), vang, vrad).astype(np.float32)).view(u.shape)
    return (torch.hypot(u, v) - rad) * m


def draw_blob(rng, g, cv: Canvas, cx=None, cy=None, r=None, colour=None):
    """A soft-edged textured shape; returns its geometry for attached strands."""
    kind = rng.choice(["ellipse", "polygon", "superellipse"], p=[0.45, 0.35, 0.2])
    cx = rng.uniform(0.2, 0.8) * cv.w if cx is None else cx
    cy = rng.uniform(0.2, 0.8) * cv.h if cy is None else cy
    r = rng.uniform(0.1, 0.32) * cv.m if r is None else r
    rx, ry = r * rng.uniform(0.6, 1.4), r * rng.uniform(0.6, 1.4)
    ang = rng.uniform(0, np.pi)
    verts = None
    if kind == "polygon":
        n = int(rng.integers(3, 10))
        a = np.sort(rng.uniform(0, 2 * np.pi, n))
        rad = rng.uniform(0.55, 1.0, n)
        verts = np.stack([np.cos(a) * rad, np.sin(a) * rad], 1).astype(np.float32)
    d = _shape_distance(cv, kind, cx, cy, rx, ry, ang, verts, p=float(rng.uniform(2.5, 6)))
    soft = float(rng.choice([rng.uniform(0.5, 1.2), rng.uniform(1.2, 6.0)], p=[0.6, 0.4]))
    a = cov_from_distance(d, soft)
    if rng.random() < 0.15:  # a hole (ring, handle)
        hr = rng.uniform(0.2, 0.5)
        dh = _shape_distance(cv, "ellipse", cx + rng.uniform(-0.2, 0.2) * rx, cy + rng.uniform(-0.2, 0.2) * ry,
                             rx * hr, ry * hr, ang)
        a = a * (1 - cov_from_distance(dh, soft))
    colour = fg_colour(rng) if colour is None else colour
    cv.over(a, _texture(g, cv, colour, rng.uniform(4, 30), rng.uniform(0.05, 0.4)))
    return dict(cx=cx, cy=cy, rx=rx, ry=ry, ang=ang, colour=colour)


def _edge_point(b, theta, frac=1.0):
    c, s = math.cos(b["ang"]), math.sin(b["ang"])
    u, v = math.cos(theta) * b["rx"] * frac, math.sin(theta) * b["ry"] * frac
    return np.array([b["cx"] + u * c - v * s, b["cy"] + u * s + v * c], np.float32)


def _strand_pts(rng, start, direction, length, curl):
    d = direction / (np.linalg.norm(direction) + 1e-9)
    n = np.array([-d[1], d[0]], np.float32)
    return np.stack([start,
                     start + d * length / 3 + n * rng.uniform(-1, 1) * length * curl,
                     start + d * 2 * length / 3 + n * rng.uniform(-1, 1) * length * curl,
                     start + d * length + n * rng.uniform(-1, 1) * length * curl * 1.3]).astype(np.float32)


def _hair_width(rng):
    # Many widths: sub-pixel fly-aways, single hairs, thick locks.
    return float(rng.choice([rng.uniform(0.25, 0.7), rng.uniform(0.7, 1.6), rng.uniform(1.6, 4.0)],
                            p=[0.45, 0.4, 0.15]))


def draw_hair(rng, g, cv: Canvas, blob=None, count=None, gravity: float = 0.0):
    b = blob or draw_blob(rng, g, cv)
    base = srgb_to_linear(fg_colour(rng, "hair") if rng.random() < 0.7 else b["colour"])
    count = int(rng.integers(8, 60)) if count is None else count
    spread = rng.uniform(0.4, 2 * np.pi)
    centre = rng.uniform(0, 2 * np.pi)
    curl = float(rng.choice([rng.uniform(0.02, 0.15), rng.uniform(0.15, 0.45)]))
    for _ in range(count):
        th = centre + rng.uniform(-spread / 2, spread / 2)
        start = _edge_point(b, th, rng.uniform(0.75, 0.98))
        out = start - np.array([b["cx"], b["cy"]], np.float32)
        direction = out / (np.linalg.norm(out) + 1e-6) + rng.normal(0, 0.35, 2).astype(np.float32)
        direction[1] += gravity
        length = rng.uniform(0.08, 0.4) * cv.m
        pts = _strand_pts(rng, start, direction, length, curl)
        w = _hair_width(rng)
        col = torch.from_numpy(base * rng.uniform(0.7, 1.3, 3).astype(np.float32) * rng.uniform(0.6, 1.5))
        taper = (w, w * rng.uniform(0.3, 1.0)) if rng.random() < 0.5 else w
        draw_strand(cv, pts, taper, col, rng.uniform(0.45, 1.0), n=int(24 + 40 * curl))
    return b


def draw_fur(rng, g, cv: Canvas):
    b = draw_blob(rng, g, cv, r=rng.uniform(0.12, 0.3) * cv.m)
    base = srgb_to_linear(b["colour"] if rng.random() < 0.6 else fg_colour(rng, "hair"))
    n = int(rng.integers(80, 400))
    flen = rng.uniform(0.015, 0.07) * cv.m
    for _ in range(n):
        th = rng.uniform(0, 2 * np.pi)
        start = _edge_point(b, th, rng.uniform(0.85, 1.0))
        out = start - np.array([b["cx"], b["cy"]], np.float32)
        direction = out / (np.linalg.norm(out) + 1e-6) + rng.normal(0, 0.4, 2).astype(np.float32)
        pts = _strand_pts(rng, start, direction, flen * rng.uniform(0.5, 1.5), 0.15)
        w = float(rng.choice([rng.uniform(0.3, 0.8), rng.uniform(0.8, 2.0)], p=[0.6, 0.4]))
        col = torch.from_numpy(base * rng.uniform(0.6, 1.4))
        draw_strand(cv, pts, (w, w * 0.4), col, rng.uniform(0.5, 1.0), n=12)
    return b


def _capsule_distance(cv: Canvas, a, b, r):
    poly = np.array([a, b], np.float32)
    dist, box = polyline_distance(cv, poly, r + 2)
    return (None, None) if dist is None else (dist - r, box)


def draw_figure(rng, g, cv: Canvas):
    """Head, neck, torso to the frame bottom, arms; hair on the head."""
    s = rng.uniform(0.5, 1.1) * cv.h
    cx = rng.uniform(0.3, 0.7) * cv.w
    head_y = cv.h - s * rng.uniform(0.75, 0.95)
    skin = fg_colour(rng, "skin")
    cloth = fg_colour(rng)
    soft = float(rng.uniform(0.6, 2.0))
    # torso: superellipse from shoulders down past the bottom edge
    tw = s * rng.uniform(0.2, 0.32)
    d = _shape_distance(cv, "superellipse", cx, head_y + s * 0.55 + s * 0.4, tw, s * 0.45, rng.uniform(-0.1, 0.1),
                        p=float(rng.uniform(2.5, 4)))
    cv.over(cov_from_distance(d, soft), _texture(g, cv, cloth, rng.uniform(4, 20), rng.uniform(0.1, 0.4)))
    for side in (-1, 1):  # arms
        if rng.random() < 0.8:
            sh = np.array([cx + side * tw * 0.85, head_y + s * 0.3], np.float32)
            el = sh + np.array([side * rng.uniform(0.05, 0.25) * s, rng.uniform(0.15, 0.35) * s], np.float32)
            hand = el + np.array([side * rng.uniform(-0.2, 0.25) * s, rng.uniform(-0.3, 0.2) * s], np.float32)
            for a_, b_, r_ in ((sh, el, s * 0.06), (el, hand, s * 0.045)):
                dist, box = _capsule_distance(cv, a_, b_, r_)
                if dist is not None:
                    col = torch.from_numpy(srgb_to_linear(cloth if r_ > s * 0.05 else skin))
                    cv.over(cov_from_distance(dist, soft), col, box)
    dist, box = _capsule_distance(cv, np.array([cx, head_y + s * 0.12], np.float32),
                                  np.array([cx, head_y + s * 0.3], np.float32), s * 0.05)
    if dist is not None:
        cv.over(cov_from_distance(dist, soft), torch.from_numpy(srgb_to_linear(skin * 0.9)), box)
    hr = s * rng.uniform(0.09, 0.13)
    head = dict(cx=cx + rng.uniform(-0.02, 0.02) * s, cy=head_y, rx=hr * 0.85, ry=hr, ang=0.0, colour=skin)
    d = _shape_distance(cv, "ellipse", head["cx"], head["cy"], head["rx"], head["ry"], 0.0)
    cv.over(cov_from_distance(d, soft), _texture(g, cv, skin, 6, 0.1))
    if rng.random() < 0.9:  # hair mass + strands
        hair = fg_colour(rng, "hair")
        d = _shape_distance(cv, "ellipse", head["cx"], head["cy"] - hr * 0.25, hr * 1.05, hr * 0.9, 0.0)
        mass = cov_from_distance(d, soft) * (cv.ys < head["cy"] + hr * rng.uniform(-0.1, 0.8)).float()
        cv.over(blur(mass, 0.7), _texture(g, cv, hair, 3, 0.3))
        b = dict(head, rx=hr * 1.05, ry=hr * 0.95, cy=head["cy"] - hr * 0.2, colour=hair)
        draw_hair(rng, g, cv, blob=b, count=int(rng.integers(20, 90)), gravity=float(rng.uniform(0, 1.5)))


def draw_lines(rng, g, cv: Canvas):
    """Wires, rods and rigging: long thin lines, straight or sagging."""
    if rng.random() < 0.5:
        draw_blob(rng, g, cv)
    for _ in range(int(rng.integers(1, 7))):
        a = np.array([rng.uniform(-0.1, 1.1) * cv.w, rng.uniform(-0.1, 1.1) * cv.h], np.float32)
        b = np.array([rng.uniform(-0.1, 1.1) * cv.w, rng.uniform(-0.1, 1.1) * cv.h], np.float32)
        sag = np.array([0, rng.uniform(-0.15, 0.25) * cv.h], np.float32)
        pts = np.stack([a, a + (b - a) / 3 + sag, a + 2 * (b - a) / 3 + sag, b]).astype(np.float32)
        w = float(rng.choice([rng.uniform(0.3, 1.0), rng.uniform(1.0, 4.0)], p=[0.55, 0.45]))
        col = torch.from_numpy(srgb_to_linear(fg_colour(rng)))
        draw_strand(cv, pts, w, col, rng.uniform(0.6, 1.0), n=48)


def draw_cloth(rng, g, cv: Canvas):
    """Semi-transparent cloth: folds modulate the opacity; sometimes over a solid subject."""
    if rng.random() < 0.5:
        draw_blob(rng, g, cv)
    kind = rng.choice(["polygon", "superellipse"])
    rx, ry = rng.uniform(0.15, 0.45) * cv.w, rng.uniform(0.15, 0.45) * cv.h
    n = int(rng.integers(4, 8))
    ang = np.sort(rng.uniform(0, 2 * np.pi, n))
    verts = np.stack([np.cos(ang), np.sin(ang)], 1).astype(np.float32) * rng.uniform(0.7, 1.0, (n, 1)).astype(np.float32)
    d = _shape_distance(cv, kind, rng.uniform(0.3, 0.7) * cv.w, rng.uniform(0.3, 0.7) * cv.h, rx, ry,
                        rng.uniform(0, np.pi), verts, p=3.0)
    edge = cov_from_distance(d, float(rng.uniform(0.7, 4)))
    t = rng.uniform(0, np.pi)
    period = rng.uniform(0.03, 0.15) * cv.m
    warp = 2 * smooth_noise(g, cv.h, cv.w, cv.m / 4) * period
    folds = 0.5 + 0.5 * torch.sin(2 * np.pi * ((cv.xs * math.cos(t) + cv.ys * math.sin(t)) + warp) / period)
    op = rng.uniform(0.1, 0.7)
    opacity = (op + rng.uniform(0.05, 0.3) * folds * (0.5 + smooth_noise(g, cv.h, cv.w, cv.m / 5))).clamp(0, 0.92)
    col = fg_colour(rng) if rng.random() < 0.6 else hsv(0, 0, rng.uniform(0.6, 1.0))
    shade = (0.75 + 0.25 * folds)[None]
    cv.over(edge * opacity, _texture(g, cv, col, 10, 0.1) * shade)


def draw_smoke(rng, g, cv: Canvas):
    if rng.random() < 0.4:
        draw_blob(rng, g, cv)
    cx, cy = rng.uniform(0.2, 0.8) * cv.w, rng.uniform(0.3, 0.8) * cv.h
    sx, sy = rng.uniform(0.1, 0.35) * cv.w, rng.uniform(0.15, 0.45) * cv.h
    env = torch.exp(-0.5 * (((cv.xs - cx) / sx) ** 2 + ((cv.ys - cy) / sy) ** 2))
    n = fbm(g, cv.h, cv.w, rng.uniform(0.1, 0.3) * cv.m, octaves=5)
    dens = ((n - rng.uniform(0.25, 0.5)) * rng.uniform(1.5, 4)).clamp(0, 1) * env
    a = (dens * rng.uniform(0.3, 1.0)).clamp(0, 0.95)
    grey = rng.uniform(0.15, 0.95)
    col = hsv(rng.uniform(0, 1), rng.uniform(0, 0.15), grey)
    cv.over(a, _texture(g, cv, col, cv.m / 6, 0.15, fine=0.0))


def draw_plant(rng, g, cv: Canvas):
    """HELD OUT of training: a stem from the bottom edge, branches, pointed leaves."""
    stem_col = srgb_to_linear(hsv(rng.uniform(0.03, 0.1), rng.uniform(0.3, 0.7), rng.uniform(0.15, 0.5)))
    x = rng.uniform(0.3, 0.7) * cv.w
    top = np.array([x + rng.uniform(-0.2, 0.2) * cv.w, rng.uniform(0.05, 0.35) * cv.h], np.float32)
    bot = np.array([x, cv.h + 5], np.float32)
    stem = np.stack([bot, bot + (top - bot) / 3 + rng.normal(0, 0.05, 2).astype(np.float32) * cv.m,
                     bot + 2 * (top - bot) / 3 + rng.normal(0, 0.05, 2).astype(np.float32) * cv.m, top])
    sw = rng.uniform(1.5, 6.0)
    draw_strand(cv, stem.astype(np.float32), (sw, sw * 0.4), torch.from_numpy(stem_col), 1.0)
    curve = bezier(stem.astype(np.float32), 32)
    branches = [curve]
    for _ in range(int(rng.integers(2, 7))):
        i = int(rng.integers(6, 30))
        p0 = curve[i]
        direction = np.array([rng.choice([-1, 1]) * rng.uniform(0.4, 1), -rng.uniform(0.2, 1)], np.float32)
        pts = _strand_pts(rng, p0, direction, rng.uniform(0.1, 0.3) * cv.m, 0.15)
        bw = sw * rng.uniform(0.3, 0.7)
        draw_strand(cv, pts, (bw, bw * 0.4), torch.from_numpy(stem_col), 1.0)
        branches.append(bezier(pts, 24))
    leaf_hue = rng.choice([rng.uniform(0.0, 0.14), rng.uniform(0.75, 1.0)])  # autumn / purple leaves
    for br in branches:
        for j in range(4, len(br), int(rng.integers(3, 7))):
            p = br[j]
            tang = br[min(j + 1, len(br) - 1)] - br[j - 1]
            ang = math.atan2(tang[1], tang[0]) + rng.choice([-1, 1]) * rng.uniform(0.5, 1.2)
            L = rng.uniform(0.03, 0.09) * cv.m
            tip = p + L * np.array([math.cos(ang), math.sin(ang)], np.float32)
            draw_strand(cv, np.stack([p, tip * 0.3 + p * 0.7]).astype(np.float32), 0.8, torch.from_numpy(stem_col), 1.0)
            c0 = p + 0.3 * (tip - p) + (tip - p) * 0.7 / 2  # leaf centre
            half = np.linalg.norm(tip - p) * 0.7 / 2
            u = ((cv.xs - float(c0[0])) * math.cos(ang) + (cv.ys - float(c0[1])) * math.sin(ang)) / half
            v = (-(cv.xs - float(c0[0])) * math.sin(ang) + (cv.ys - float(c0[1])) * math.cos(ang))
            wid = half * rng.uniform(0.3, 0.55) * (1 - u * u).clamp_min(0) ** 0.8
            d = torch.maximum(v.abs() - wid, (u.abs() - 1) * half)
            a = cov_from_distance(d, float(rng.uniform(0.6, 1.5)))
            col = hsv(leaf_hue + rng.uniform(-0.03, 0.03), rng.uniform(0.4, 0.9), rng.uniform(0.3, 0.9))
            rib = 1 - 0.3 * line_cov(v.abs(), 0.8)
            cv.over(a, torch.from_numpy(srgb_to_linear(col)).view(3, 1, 1) * rib[None])


DRAW = dict(blob=lambda r, g, c: [draw_blob(r, g, c) for _ in range(int(r.integers(1, 4)))],
            figure=draw_figure, fur=draw_fur, hair=draw_hair, lines=draw_lines,
            cloth=draw_cloth, smoke=draw_smoke, plant=draw_plant)


# ---------------------------------------------------------------------------------------
# Screens (linear light)

def screen_base(rng, colour: str) -> np.ndarray:
    if colour == "blue":
        return np.array([rng.uniform(0.02, 0.2), rng.uniform(0.12, 0.45), rng.uniform(0.45, 0.9)], np.float32)
    g = rng.uniform(0.42, 0.85)  # sRGB; green leads red by >= 0.2 and blue by >= 0.15
    return np.array([rng.uniform(0.02, min(0.32, g - 0.2)), g, rng.uniform(0.05, min(0.4, g - 0.15))], np.float32)


def make_screen(rng, g, h: int, w: int, kind: str, colour: str = "green") -> torch.Tensor:
    base = torch.from_numpy(srgb_to_linear(screen_base(rng, colour))).view(3, 1, 1)
    gy = torch.linspace(-1, 1, h).view(h, 1)
    gx = torch.linspace(-1, 1, w).view(1, w)
    m = float(min(h, w))
    strength = {"flat": 0.08, "uneven": 0.35, "graded": 0.25, "creased": 0.2, "panels": 0.15}[kind]
    grad = 1 + strength * (rng.uniform(-1, 1) * gx + rng.uniform(-1, 1) * gy)
    vign = 1 - rng.uniform(0, 0.5) * strength * 2 * (gx ** 2 + gy ** 2) / 2
    blotch = 1 + 2 * strength * (smooth_noise(g, h, w, rng.uniform(0.1, 0.4) * m) - 0.5)
    illum = (grad * vign * blotch).clamp_min(0.1)
    bg = base * illum[None]
    if kind == "graded":  # a second green across the frame (hue and level)
        other = torch.from_numpy(srgb_to_linear(screen_base(rng, colour))).view(3, 1, 1)
        t = rng.uniform(0, np.pi)
        ramp = ((math.cos(t) * gx + math.sin(t) * gy) * rng.uniform(0.5, 1.5) + 0.5).clamp(0, 1)
        bg = bg * (1 - ramp) + other * illum[None] * ramp
    if kind == "creased":  # wrinkles and folds: a light and a dark side along curves
        cv = Canvas(h, w)
        shade = torch.zeros(h, w)
        for _ in range(int(rng.integers(2, 9))):
            a = np.array([rng.uniform(0, w), rng.uniform(0, h)], np.float32)
            d = rng.normal(0, 1, 2).astype(np.float32)
            pts = _strand_pts(rng, a, d, rng.uniform(0.2, 0.8) * m, 0.2)
            dist, box = polyline_distance(cv, bezier(pts, 32), 30)
            if dist is None:
                continue
            wdt = rng.uniform(2, 15)
            y0, y1, x0, x1 = box
            side = torch.sign(smooth_noise(g, y1 - y0, x1 - x0, 50) - 0.5 + 1e-6)
            shade[y0:y1, x0:x1] += rng.uniform(0.05, 0.3) * torch.exp(-(dist / wdt) ** 2) * (side if rng.random() < 0.5 else -1)
        bg = bg * (1 + shade.clamp(-0.6, 0.6))[None]
    if kind == "panels":  # HELD OUT: painted panels, seams between them, a hot-spot
        n = int(rng.integers(2, 6))
        vertical = rng.random() < 0.7
        coord = (torch.arange(w).float() / w).view(1, w) if vertical else (torch.arange(h).float() / h).view(h, 1)
        edges = np.sort(rng.uniform(0.1, 0.9, n - 1))
        idx = torch.bucketize(coord.contiguous(), torch.from_numpy(edges.astype(np.float32)))
        tints = torch.from_numpy(np.stack([rng.uniform(0.82, 1.18, 3) for _ in range(n)]).astype(np.float32))
        tint = tints[idx.expand(h, w)].permute(2, 0, 1)
        bg = bg * tint
        px = w if vertical else h
        for e in edges:
            dist = (coord * px - e * px).abs().expand(h, w)
            bg = bg * (1 - rng.uniform(0.3, 0.8) * line_cov(dist, rng.uniform(1, 3.5))[None]
                       - rng.uniform(0.0, 0.15) * torch.exp(-dist / rng.uniform(3, 12))[None])
        hx, hy = rng.uniform(0.2, 0.8), rng.uniform(0.1, 0.6)
        r2 = ((gx - (2 * hx - 1)) ** 2 + (gy - (2 * hy - 1)) ** 2)
        bg = bg * (1 + rng.uniform(0.3, 1.0) * torch.exp(-r2 / rng.uniform(0.05, 0.4)))[None]
    return bg.clamp_min(0)


def draw_markers(rng, g, bg: torch.Tensor) -> torch.Tensor:
    """Tracking markers on the screen (background: alpha 0): tape crosses and dots."""
    _, h, w = bg.shape
    cv = Canvas(h, w)
    cv.P, cv.A = bg.clone(), torch.ones(h, w)
    size = rng.uniform(0.015, 0.05) * min(h, w)
    col = torch.from_numpy(srgb_to_linear(
        [hsv(0, 0, rng.uniform(0.7, 1.0)), hsv(0, 0, rng.uniform(0.0, 0.15)), hsv(rng.uniform(0.85, 1.0), 0.6, 0.9),
         hsv(rng.uniform(0.2, 0.4), 0.5, 0.9)][int(rng.integers(0, 4))]))
    cross = rng.random() < 0.7
    nx, ny = int(rng.integers(2, 6)), int(rng.integers(2, 4))
    for i in range(nx):
        for j in range(ny):
            c = np.array([(i + 0.5 + rng.uniform(-0.2, 0.2)) * w / nx, (j + 0.5 + rng.uniform(-0.2, 0.2)) * h / ny], np.float32)
            if cross:
                t = rng.uniform(0, np.pi)
                for k in (0, 1):
                    d = np.array([math.cos(t + k * np.pi / 2), math.sin(t + k * np.pi / 2)], np.float32) * size
                    dist, box = polyline_distance(cv, np.stack([c - d, c + d]), size * 0.3 + 2)
                    if dist is not None:
                        cv.over(line_cov(dist, size * 0.25), col, box)
            else:
                dist, box = polyline_distance(cv, np.stack([c, c + 0.01]), size)
                if dist is not None:
                    cv.over(cov_from_distance(dist - size * 0.4, 1.0), col, box)
    return cv.P


# ---------------------------------------------------------------------------------------
# Scenes

@dataclass
class Scene:
    seed: int
    family: str
    extra: str | None
    screen: str
    screen_color: str
    exposure: float
    markers: bool
    shadow: tuple | None       # (dx, dy, sigma, strength) in units of min(h, w)
    motion: tuple | None       # (length as a fraction of min(h, w), angle)
    defocus: float             # sigma as a fraction of min(h, w)
    spill: float
    ambient: float
    noise: tuple               # (read, shot, grain sigma px)
    color: str                 # "srgb" | "linear": how the plate is delivered
    jpeg: int | None
    fields: dict = field(default_factory=dict)


def random_scene(rng: np.random.Generator, heldout: bool = False, color: str | None = None,
                 screen_color: str = "green", family: str | None = None) -> Scene:
    if family is not None and not heldout:
        if family not in TRAIN_FAMILIES:
            raise ValueError(f"family {family!r} is not a training family {TRAIN_FAMILIES}")
        screen = str(rng.choice(TRAIN_SCREENS, p=[0.2, 0.3, 0.25, 0.25]))
        extra = None
    elif heldout:
        family, screen, extra = HELDOUT_FAMILY, HELDOUT_SCREEN, None
    else:
        family = str(rng.choice(TRAIN_FAMILIES, p=FAMILY_WEIGHTS))
        extra = str(rng.choice(TRAIN_FAMILIES, p=FAMILY_WEIGHTS)) if rng.random() < 0.3 else None
        screen = str(rng.choice(TRAIN_SCREENS, p=[0.2, 0.3, 0.25, 0.25]))
    color = color or ("linear" if rng.random() < 0.45 else "srgb")
    m = 1.0
    return Scene(
        seed=int(rng.integers(1 << 31)), family=family, extra=extra, screen=screen, screen_color=screen_color,
        exposure=float(np.exp(rng.uniform(-0.7, 0.5))),
        markers=bool(rng.random() < 0.3),
        shadow=(float(rng.uniform(-0.1, 0.1)), float(rng.uniform(0, 0.12)), float(rng.uniform(0.01, 0.08)),
                float(rng.uniform(0.15, 0.6))) if rng.random() < 0.35 else None,
        motion=(float(rng.uniform(0.01, 0.06) * m), float(rng.uniform(0, np.pi))) if rng.random() < 0.22 else None,
        defocus=float(rng.uniform(0.002, 0.008)) if rng.random() < 0.2 else 0.0,
        spill=float(rng.uniform(0.0, 0.6)), ambient=float(rng.uniform(0.0, 0.12)),
        noise=(float(np.exp(rng.uniform(np.log(0.0008), np.log(0.012)))), float(rng.uniform(0, 0.003)),
               float(rng.choice([0.0, rng.uniform(0.5, 1.2)]))),
        color=color,
        jpeg=int(rng.integers(45, 96)) if (color == "srgb" and rng.random() < 0.6) else None)


def render_foreground(scene: Scene, h: int, w: int):
    """(P [3,H,W] premultiplied linear, A [H,W]) for the scene's subject."""
    rng = np.random.default_rng(scene.seed)
    g = torch.Generator().manual_seed(scene.seed)
    cv = Canvas(h, w)
    out = DRAW[scene.family](rng, g, cv)
    if scene.extra:
        DRAW[scene.extra](rng, g, cv)
    if scene.family in ("blob", "cloth", "lines") and rng.random() < 0.3:  # stray hairs
        b = out[0] if isinstance(out, list) else draw_blob(rng, g, cv)
        draw_hair(rng, g, cv, blob=b, count=int(rng.integers(3, 25)))
    P, A = cv.P, cv.A.clamp(0, 1)
    m = min(h, w)
    if scene.defocus > 0:
        P, A = blur(P, scene.defocus * m), blur(A, scene.defocus * m)
    if scene.motion is not None:
        P, A = directional_blur(P, scene.motion[0] * m, scene.motion[1]), directional_blur(A, scene.motion[0] * m, scene.motion[1])
    return P, A.clamp(0, 1)


def render_background(scene: Scene, h: int, w: int) -> torch.Tensor:
    rng = np.random.default_rng(scene.seed + 1)
    g = torch.Generator().manual_seed(scene.seed + 1)
    bg = make_screen(rng, g, h, w, scene.screen, scene.screen_color)
    if scene.markers:
        bg = draw_markers(rng, g, bg)
    return bg


def finish(scene: Scene, P: torch.Tensor, A: torch.Tensor, bg: torch.Tensor, g: torch.Generator):
    """Shadow, spill, exposure, composite, noise; the plate as delivered (numpy [H,W,3])."""
    h, w = A.shape
    m = min(h, w)
    e = scene.exposure
    if scene.shadow is not None:
        dx, dy, sg, st = scene.shadow
        sh = blur(shift(A, dx * m, dy * m), sg * m) * st
        bg = bg * (1 - sh)[None]
    # Spill: screen light on the subject, strongest near its edges and on thin / see-through parts.
    screen_light = blur(bg, 0.05 * m)
    edge = (1 - blur(A, 0.02 * m + 1)).clamp(0, 1)
    s = (scene.spill * edge + scene.ambient)[None]
    Ps = P * (1 - s * 0.7) + A[None] * s * screen_light * 1.2
    plate = (Ps + (1 - A)[None] * bg) * e
    read, shot, grain = scene.noise
    sigma = torch.sqrt(read ** 2 + shot * plate.clamp_min(0))
    n = torch.randn(plate.shape, generator=g)
    if grain > 0:
        n = blur(n, grain) * (1 + 1.5 * grain)
    plate = (plate + sigma * n).clamp_min(0)
    if scene.color == "linear":
        return plate.half().float().permute(1, 2, 0).numpy()
    s8 = (linear_to_srgb(plate).clamp(0, 1) * 255 + 0.5).to(torch.uint8).permute(1, 2, 0).numpy()
    if scene.jpeg:
        buf = io.BytesIO()
        Image.fromarray(s8).save(buf, format="JPEG", quality=scene.jpeg)
        s8 = np.asarray(Image.open(io.BytesIO(buf.getvalue())))
    return s8.astype(np.float32) / 255.0


# ---------------------------------------------------------------------------------------
# Hints

HINT_KINDS = ("blur_threshold", "morph", "blurred_alpha", "chroma", "roto")


def chroma_alpha(plate_srgb: np.ndarray | torch.Tensor, k: float, b: float, blue: bool = False):
    """Classic green-difference key: 1 - clip(k * (G - max(R, B)) - b, 0, 1)."""
    p = torch.as_tensor(plate_srgb)
    gch, o1, o2 = (p[..., 2], p[..., 0], p[..., 1]) if blue else (p[..., 1], p[..., 0], p[..., 2])
    return 1 - (k * (gch - torch.maximum(o1, o2)) - b).clamp(0, 1)


def make_hint(alpha, rng: np.random.Generator, plate_srgb=None, kind: str | None = None,
              blue: bool = False) -> np.ndarray:
    """A coarse matte as users make them (at the frame size). A hint that lost most of the
    subject (an erosion that wiped out thin stems) is made again; the last try is a blurred
    copy of the alpha."""
    A = torch.as_tensor(alpha, dtype=torch.float32)
    total = float(A.sum())
    for attempt in range(3):
        hm = _hint_once(A, rng, plate_srgb, kind if attempt < 2 else "blurred_alpha", blue)
        if total == 0 or float(hm.sum()) >= 0.35 * total:
            break
    return hm.clamp(0, 1).numpy().astype(np.float32)


def _hint_once(A: torch.Tensor, rng: np.random.Generator, plate_srgb, kind, blue) -> torch.Tensor:
    h, w = A.shape
    m = min(h, w)
    s = m / 360.0  # sizes are chosen for 360-line frames and scaled
    kind = kind or str(rng.choice(HINT_KINDS, p=[0.3, 0.2, 0.15, 0.15, 0.2] if plate_srgb is not None
                                  else [0.35, 0.25, 0.15, 0.0, 0.25]))
    if kind == "blur_threshold":
        hm = (A > rng.uniform(0.05, 0.8)).float()
        hm = morph(hm, int(round(rng.integers(-3, 7) * s)))
        hm = blur(hm, rng.uniform(1.5, 12) * s)
    elif kind == "morph":
        hm = morph((A > 0.5).float(), int(round(rng.integers(-8, 12) * s)))
        hm = blur(hm, rng.uniform(0.5, 6) * s)
    elif kind == "blurred_alpha":
        hm = blur(A, rng.uniform(2, 12) * s)
    elif kind == "chroma":
        key = chroma_alpha(plate_srgb, rng.uniform(2, 10), rng.uniform(-0.1, 0.3), blue)
        key = morph(morph(key, 1), -1) if rng.random() < 0.5 else key
        if rng.random() < 0.8:  # garbage matte: a generous region around the subject
            garbage = blur(morph((A > 0.02).float(), int(rng.uniform(10, 40) * s)), 8 * s)
            key = key * garbage
        hm = blur(key, rng.uniform(0.5, 4) * s)
    else:  # rough roto: smooth outline, no strands, feathered edge
        hm = (blur((A > 0.5).float(), rng.uniform(4, 18) * s) > 0.5).float()
        hm = morph(hm, int(round(rng.integers(-2, 8) * s)))
        hm = blur(hm, rng.uniform(0.7, 3) * s)
    if rng.random() < 0.12:  # blocky: a low-resolution key
        f = int(rng.integers(4, 12))
        small = F.interpolate(hm[None, None], size=(max(1, h // f), max(1, w // f)), mode="area")
        hm = F.interpolate(small, size=(h, w), mode="bilinear", align_corners=False)[0, 0]
    if rng.random() < 0.15:  # holes
        yy, xx = torch.meshgrid(torch.arange(h).float(), torch.arange(w).float(), indexing="ij")
        for _ in range(int(rng.integers(1, 4))):
            cy, cx, r = rng.uniform(0, h), rng.uniform(0, w), rng.uniform(0.02, 0.08) * m
            hm = torch.where(torch.hypot(yy - cy, xx - cx) < r, hm * rng.uniform(0, 0.5), hm)
    if rng.random() < 0.15:  # lagging: the hint from a neighbouring frame
        hm = shift(hm, rng.uniform(-6, 6) * s, rng.uniform(-6, 6) * s)
    if rng.random() < 0.15:  # levels
        hm = hm * rng.uniform(0.6, 1.0)
    return hm


# ---------------------------------------------------------------------------------------

def generate(rng: np.random.Generator, h: int, w: int, scene: Scene | None = None, heldout: bool = False,
             color: str | None = None, screen_color: str = "green", swap_gb: bool = False,
             hint_kind: str | None = None, offset=(0.0, 0.0), fg_cache=None, hint_rng=None):
    """One sample (numpy, [H,W(,3)]): plate (sRGB-encoded or scene-linear per `linear`), hint,
    alpha, fg (clean, sRGB-encoded, straight), background (linear), scene.

    swap_gb: swap G and B of the plate, fg and background (a blue-screen plate as the green
    model sees it when the engine keys blue by swapping channels)."""
    scene = scene or random_scene(rng, heldout, color, screen_color)
    P, A = fg_cache if fg_cache is not None else render_foreground(scene, h, w)
    if offset != (0.0, 0.0):
        P, A = shift(P, *offset), shift(A, *offset)
    bg = render_background(scene, h, w)
    g = torch.Generator().manual_seed(int(rng.integers(1 << 31)))
    plate = finish(scene, P, A, bg, g)
    plate_srgb = linear_to_srgb(plate) if scene.color == "linear" else plate
    hint = make_hint(A, hint_rng or rng, plate_srgb, hint_kind, blue=scene.screen_color == "blue")
    fg_lin = torch.where(A > 1e-4, P / A.clamp_min(1e-4), torch.zeros_like(P)) * scene.exposure
    fg = linear_to_srgb(fg_lin).clamp(0, 1).permute(1, 2, 0).numpy()
    background = (bg * scene.exposure).permute(1, 2, 0).numpy()
    if swap_gb:
        plate, fg, background = plate[..., [0, 2, 1]], fg[..., [0, 2, 1]], background[..., [0, 2, 1]]
    return dict(plate=np.ascontiguousarray(plate, np.float32), hint=hint, alpha=A.numpy().astype(np.float32),
                fg=np.ascontiguousarray(fg, np.float32), background=np.ascontiguousarray(background, np.float32),
                linear=scene.color == "linear", scene=scene)


def model_view(s: dict, size: int) -> dict:
    """What the engine hands the model at img_size `size`, and the matching targets (torch,
    [C,S,S]): rgb in sRGB (resized, then converted when the plate is linear), hint, alpha,
    fg (sRGB, from the premultiplied resize), background (linear)."""
    def t(a):
        x = torch.from_numpy(a)
        return x.permute(2, 0, 1) if x.dim() == 3 else x[None]
    rgb = resize(t(s["plate"]), size, size)
    if s["linear"]:
        rgb = linear_to_srgb(rgb)
    alpha = resize(t(s["alpha"]), size, size).clamp(0, 1)
    fg_lin = srgb_to_linear(t(s["fg"]))
    prem = resize(fg_lin * t(s["alpha"]), size, size)
    fg = linear_to_srgb(torch.where(alpha > 1e-3, prem / alpha.clamp_min(1e-3), resize(fg_lin, size, size))).clamp(0, 1)
    return dict(plate=rgb, hint=resize(t(s["hint"]), size, size).clamp(0, 1), alpha=alpha, fg=fg,
                background=resize(t(s["background"]), size, size))


# ---------------------------------------------------------------------------------------

def _save8(path: str, img: np.ndarray):
    Image.fromarray((np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8)).save(path)


def _save16(path: str, img: np.ndarray):
    Image.fromarray((np.clip(img, 0, 1) * 65535 + 0.5).astype(np.uint16)).save(path)


def save_exr(path: str, img: np.ndarray):
    os.environ.setdefault("OPENCV_IO_ENABLE_OPENEXR", "1")
    import cv2
    a = img.astype(np.float32)
    if a.ndim == 3:
        a = a[..., ::-1]  # OpenCV writes BGR
    if not cv2.imwrite(path, np.ascontiguousarray(a), [cv2.IMWRITE_EXR_TYPE, cv2.IMWRITE_EXR_TYPE_HALF]):
        raise RuntimeError(f"cannot write {path}")


def write_sample(out: str, name: str, s: dict):
    if s["linear"]:
        save_exr(f"{out}/Input/{name}.exr", s["plate"])
    else:
        _save8(f"{out}/Input/{name}.png", s["plate"])
    _save8(f"{out}/AlphaHint/{name}.png", s["hint"])
    _save16(f"{out}/GT/alpha/{name}.png", s["alpha"])
    _save8(f"{out}/GT/fg/{name}.png", s["fg"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--frames", type=int, default=16)
    ap.add_argument("--size", default="320x180", help="WxH")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--clip", action="store_true", help="one moving scene instead of independent frames")
    ap.add_argument("--heldout", action="store_true", help="the held-out family (plants over panel screens)")
    ap.add_argument("--color", choices=["srgb", "linear"], default="srgb",
                    help="plates as 8-bit sRGB PNG (default) or scene-linear half EXR")
    ap.add_argument("--screen", choices=["green", "blue"], default="green")
    ap.add_argument("--family", choices=TRAIN_FAMILIES, help="a clip's subject (default: random)")
    a = ap.parse_args(argv)
    w, h = (int(v) for v in a.size.lower().split("x"))
    for d in ("Input", "AlphaHint", "GT/alpha", "GT/fg"):
        os.makedirs(f"{a.out}/{d}", exist_ok=True)
    rng = np.random.default_rng(a.seed)
    torch.manual_seed(a.seed)
    if a.clip:  # one scene moving; the same kind of hint, made the same way, every frame
        base = random_scene(rng, a.heldout, a.color, a.screen, a.family)
        cache = render_foreground(base, h, w)
        kind, hint_seed = str(rng.choice(["blur_threshold", "morph", "roto", "chroma"])), int(rng.integers(1 << 31))
    for i in range(a.frames):
        if a.clip:
            s = generate(rng, h, w, base, offset=(1.5 * i * w / 320, 0.4 * i * h / 180), fg_cache=cache,
                         hint_kind=kind, hint_rng=np.random.default_rng(hint_seed))
        else:
            s = generate(np.random.default_rng(a.seed + i), h, w, heldout=a.heldout, color=a.color,
                         screen_color=a.screen)
        write_sample(a.out, f"frame_{i + 1:04d}", s)
    print(f"wrote {a.frames} {'clip ' if a.clip else ''}frames {w}x{h} to {a.out} (seed {a.seed}, "
          f"{'held-out family, ' if a.heldout else ''}{a.color}, {a.screen} screen)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
