#!/usr/bin/env python3
"""Procedural green-screen data with ground truth, seeded and reproducible.

Each sample: a foreground (soft-edged shapes with texture, thin hair-like strands,
semi-transparent veils, sometimes motion blur) over a green screen with uneven lighting,
green spill on the foreground near its edges, sensor noise and mild JPEG compression; plus
an alpha hint made the way users make them (blurred, eroded or dilated coarse versions of the
true matte, sometimes with holes or blocky).

Ground truth: alpha (true coverage) and the clean (spill-free) foreground colour.
Colours are sRGB-encoded values in 0..1; compositing is done on those values, as the
CorridorKey reference's training data does.

  # a clip in the engine's layout (Input/, AlphaHint/) plus GT/alpha, GT/fg
  python tools/make_synthetic.py --out samples/greenscreen_demo --frames 16 --size 320x180 --seed 7 --clip
  # independent frames (held-out evaluation set)
  python tools/make_synthetic.py --out /tmp/heldout --frames 50 --size 256x256 --seed 1000

`generate(rng, h, w, ...)` is also imported by tools/train_tiny.py to make training data
on the fly.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import sys
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image


# ---------------------------------------------------------------------------------------
# Small image helpers (torch on CPU: vectorised, fast at these sizes)

def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))


def gaussian_blur(img: np.ndarray, sigma: float) -> np.ndarray:
    """img [H,W] or [H,W,C]; separable Gaussian, reflect padding."""
    if sigma <= 0.05:
        return img
    r = max(1, int(math.ceil(3 * sigma)))
    k = torch.exp(-0.5 * (torch.arange(-r, r + 1, dtype=torch.float32) / sigma) ** 2)
    k = k / k.sum()
    x = _t(img)
    chw = x.permute(2, 0, 1).unsqueeze(0) if x.dim() == 3 else x[None, None]
    c = chw.shape[1]
    kx = k.view(1, 1, 1, -1).repeat(c, 1, 1, 1)
    ky = k.view(1, 1, -1, 1).repeat(c, 1, 1, 1)
    chw = F.conv2d(F.pad(chw, (r, r, 0, 0), mode="reflect"), kx, groups=c)
    chw = F.conv2d(F.pad(chw, (0, 0, r, r), mode="reflect"), ky, groups=c)
    out = chw[0].permute(1, 2, 0) if x.dim() == 3 else chw[0, 0]
    return out.numpy()


def morph(mask: np.ndarray, radius: int) -> np.ndarray:
    """Dilate (radius > 0) or erode (radius < 0) a [H,W] mask with a square element."""
    if radius == 0:
        return mask
    x = _t(mask)[None, None]
    k = 2 * abs(radius) + 1
    if radius > 0:
        return F.max_pool2d(x, k, 1, abs(radius))[0, 0].numpy()
    return (-F.max_pool2d(-x, k, 1, abs(radius)))[0, 0].numpy()


def directional_blur(img: np.ndarray, length: int, angle: float) -> np.ndarray:
    """Motion blur: average of `length` copies shifted along `angle` (bilinear shifts)."""
    if length <= 1:
        return img
    x = _t(img)
    chw = x.permute(2, 0, 1).unsqueeze(0) if x.dim() == 3 else x[None, None]
    h, w = chw.shape[-2:]
    acc = torch.zeros_like(chw)
    ys, xs = torch.meshgrid(torch.linspace(-1, 1, h), torch.linspace(-1, 1, w), indexing="ij")
    for i in range(length):
        t = i - (length - 1) / 2
        dx, dy = t * math.cos(angle) * 2 / w, t * math.sin(angle) * 2 / h
        grid = torch.stack([xs + dx, ys + dy], -1)[None]
        acc += F.grid_sample(chw, grid, mode="bilinear", padding_mode="border", align_corners=True)
    out = acc / length
    return (out[0].permute(1, 2, 0) if x.dim() == 3 else out[0, 0]).numpy()


def smooth_noise(rng: np.random.Generator, h: int, w: int, scale: int, channels: int = 1) -> np.ndarray:
    """Low-frequency noise in 0..1: random grid upsampled bicubically."""
    gh, gw = max(2, h // scale), max(2, w // scale)
    g = torch.from_numpy(rng.random((1, channels, gh, gw)).astype(np.float32))
    up = F.interpolate(g, size=(h, w), mode="bicubic", align_corners=False).clamp(0, 1)[0]
    return up.permute(1, 2, 0).numpy() if channels > 1 else up[0].numpy()


# ---------------------------------------------------------------------------------------
# Scene description (kept so clips can move the same objects from frame to frame)

@dataclass
class Shape:
    kind: str          # "ellipse" | "polygon"
    cx: float
    cy: float
    rx: float
    ry: float
    angle: float
    softness: float    # edge width in pixels
    color: np.ndarray  # base sRGB colour (3,)
    verts: np.ndarray | None = None  # polygon vertices relative to centre, unit scale


@dataclass
class Strand:
    pts: np.ndarray    # [4, 2] cubic Bezier control points (pixels)
    width: float
    opacity: float


@dataclass
class Scene:
    shapes: list
    strands: list
    veil: tuple | None          # (cx, cy, r, opacity)
    screen: np.ndarray          # base green (3,)
    light_seed: int
    motion: tuple | None        # (length, angle)
    spill: float                # 0..1
    noise: float
    jpeg: int | None


def random_scene(rng: np.random.Generator, h: int, w: int) -> Scene:
    shapes = []
    for _ in range(rng.integers(1, 4)):
        hue = rng.choice([rng.uniform(0.0, 0.17), rng.uniform(0.5, 1.0)])  # avoid greens
        sat, val = rng.uniform(0.2, 0.8), rng.uniform(0.3, 0.95)
        color = np.array(_hsv_to_rgb(hue, sat, val), np.float32)
        kind = "polygon" if rng.random() < 0.4 else "ellipse"
        verts = None
        if kind == "polygon":
            n = rng.integers(5, 9)
            ang = np.sort(rng.uniform(0, 2 * np.pi, n))
            rad = rng.uniform(0.6, 1.0, n)
            verts = np.stack([np.cos(ang) * rad, np.sin(ang) * rad], 1).astype(np.float32)
        shapes.append(Shape(kind, rng.uniform(0.25, 0.75) * w, rng.uniform(0.25, 0.75) * h,
                            rng.uniform(0.12, 0.3) * min(h, w), rng.uniform(0.12, 0.35) * min(h, w),
                            rng.uniform(0, np.pi), rng.uniform(0.6, 3.0), color, verts))
    strands = []
    s0 = shapes[0]
    for _ in range(rng.integers(0, 14)):
        a = rng.uniform(0, 2 * np.pi)
        start = np.array([s0.cx + np.cos(a) * s0.rx * 0.8, s0.cy + np.sin(a) * s0.ry * 0.8])
        length = rng.uniform(0.1, 0.35) * min(h, w)
        d = np.array([np.cos(a), np.sin(a)])
        n = np.array([-d[1], d[0]])
        pts = np.stack([start,
                        start + d * length / 3 + n * rng.uniform(-1, 1) * length / 4,
                        start + d * 2 * length / 3 + n * rng.uniform(-1, 1) * length / 4,
                        start + d * length + n * rng.uniform(-1, 1) * length / 3]).astype(np.float32)
        strands.append(Strand(pts, rng.uniform(0.4, 1.4), rng.uniform(0.5, 1.0)))
    veil = None
    if rng.random() < 0.35:
        veil = (rng.uniform(0.3, 0.7) * w, rng.uniform(0.3, 0.7) * h,
                rng.uniform(0.08, 0.2) * min(h, w), rng.uniform(0.25, 0.7))
    screen = np.array([rng.uniform(0.05, 0.25), rng.uniform(0.5, 0.8), rng.uniform(0.1, 0.3)], np.float32)
    motion = (int(rng.integers(3, 10)), rng.uniform(0, np.pi)) if rng.random() < 0.3 else None
    return Scene(shapes, strands, veil, screen, int(rng.integers(1 << 30)), motion,
                 float(rng.uniform(0.0, 0.6)), float(rng.uniform(0.004, 0.02)),
                 int(rng.integers(80, 96)) if rng.random() < 0.7 else None)


def _hsv_to_rgb(h: float, s: float, v: float):
    i = int(h * 6) % 6
    f = h * 6 - int(h * 6)
    p, q, t = v * (1 - s), v * (1 - f * s), v * (1 - (1 - f) * s)
    return [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)][i]


def move(scene: Scene, dx: float, dy: float, dangle: float) -> Scene:
    """The same scene with every object translated / turned (for clips)."""
    shapes = [Shape(s.kind, s.cx + dx, s.cy + dy, s.rx, s.ry, s.angle + dangle, s.softness, s.color, s.verts)
              for s in scene.shapes]
    strands = [Strand(st.pts + np.array([dx, dy], np.float32), st.width, st.opacity) for st in scene.strands]
    veil = None if scene.veil is None else (scene.veil[0] + dx, scene.veil[1] + dy, scene.veil[2], scene.veil[3])
    return Scene(shapes, strands, veil, scene.screen, scene.light_seed, scene.motion, scene.spill,
                 scene.noise, scene.jpeg)


# ---------------------------------------------------------------------------------------
# Rendering

def _shape_coverage(s: Shape, ys: np.ndarray, xs: np.ndarray) -> np.ndarray:
    c, sn = math.cos(s.angle), math.sin(s.angle)
    u = ((xs - s.cx) * c + (ys - s.cy) * sn) / s.rx
    v = (-(xs - s.cx) * sn + (ys - s.cy) * c) / s.ry
    if s.kind == "ellipse":
        d = (np.sqrt(u * u + v * v) - 1.0) * min(s.rx, s.ry)  # approx. signed distance (px)
    else:
        # Polygon: inside if the point's radius is below the interpolated vertex radius.
        ang = np.arctan2(v, u)
        vang = np.arctan2(s.verts[:, 1], s.verts[:, 0])
        vrad = np.hypot(s.verts[:, 0], s.verts[:, 1])
        order = np.argsort(vang)
        vang, vrad = vang[order], vrad[order]
        vang = np.concatenate([vang - 2 * np.pi, vang, vang + 2 * np.pi])
        vrad = np.concatenate([vrad, vrad, vrad])
        rad = np.interp(ang, vang, vrad)
        d = (np.hypot(u, v) - rad) * min(s.rx, s.ry)
    return np.clip(0.5 - d / s.softness, 0.0, 1.0)


def _strand_coverage(st: Strand, h: int, w: int) -> np.ndarray:
    t = np.linspace(0, 1, 48, dtype=np.float32)[:, None]
    p = st.pts
    curve = ((1 - t) ** 3) * p[0] + 3 * ((1 - t) ** 2) * t * p[1] + 3 * (1 - t) * t * t * p[2] + t ** 3 * p[3]
    out = np.zeros((h, w), np.float32)
    # Only the strand's bounding box (plus its width) can be covered.
    pad = st.width + 2
    x0, y0 = int(max(0, np.floor(curve[:, 0].min() - pad))), int(max(0, np.floor(curve[:, 1].min() - pad)))
    x1, y1 = int(min(w, np.ceil(curve[:, 0].max() + pad))), int(min(h, np.ceil(curve[:, 1].max() + pad)))
    if x1 <= x0 or y1 <= y0:
        return out
    a, b = torch.from_numpy(curve[:-1]), torch.from_numpy(curve[1:])
    ys, xs = torch.meshgrid(torch.arange(y0, y1, dtype=torch.float32) + 0.5,
                            torch.arange(x0, x1, dtype=torch.float32) + 0.5, indexing="ij")
    q = torch.stack([xs, ys], -1).view(-1, 1, 2)
    ab = (b - a)[None]
    tt = (((q - a[None]) * ab).sum(-1) / (ab * ab).sum(-1).clamp_min(1e-6)).clamp(0, 1)
    dist = (q - (a[None] + tt[..., None] * ab)).norm(dim=-1).min(dim=1).values.view(y1 - y0, x1 - x0)
    # Thin strands: coverage = overlap of a width-w line with the pixel (~ w for w < 1).
    cov = (st.width / 2 + 0.5 - dist).clamp(0, 1) * min(1.0, st.width)
    out[y0:y1, x0:x1] = (cov * st.opacity).numpy()
    return out


def render(scene: Scene, h: int, w: int, rng: np.random.Generator):
    """Returns (plate [H,W,3], alpha [H,W], fg [H,W,3] clean, background [H,W,3])."""
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32) + 0.5
    alpha = np.zeros((h, w), np.float32)
    fg = np.zeros((h, w, 3), np.float32)
    for s in scene.shapes:  # painter's order, later shapes on top
        cov = _shape_coverage(s, ys, xs)
        tex = 0.75 + 0.5 * smooth_noise(rng, h, w, 12, 3) * (0.6 + 0.4 * rng.random())
        col = np.clip(s.color[None, None] * tex + 0.04 * rng.standard_normal((h, w, 3)), 0, 1)
        fg = fg * (1 - cov[..., None]) + col * cov[..., None]
        alpha = alpha + cov * (1 - alpha)
    if scene.shapes and scene.strands:
        hair = scene.shapes[0].color * 0.6
        for st in scene.strands:
            cov = _strand_coverage(st, h, w)
            fg = np.where(alpha[..., None] > 0, fg, hair[None, None]) * (1 - cov[..., None]) + hair * cov[..., None]
            alpha = alpha + cov * (1 - alpha)
    if scene.veil is not None:
        cx, cy, r, op = scene.veil
        d = np.hypot(xs - cx, ys - cy)
        inside = np.clip((r - d) / 3.0, 0, 1) * op
        veil_col = np.array([0.9, 0.85, 0.8], np.float32)
        fg = fg * (1 - inside[..., None]) + veil_col * inside[..., None]
        # A veil over empty screen is semi-transparent; over a solid object it stays solid.
        alpha = alpha + inside * (1 - alpha)
    if scene.motion is not None:
        length, ang = scene.motion
        pre = directional_blur(fg * alpha[..., None], length, ang)
        alpha = directional_blur(alpha, length, ang)
        fg = np.where(alpha[..., None] > 1e-4, pre / np.maximum(alpha[..., None], 1e-4), fg)
    fg = np.clip(fg, 0, 1)
    alpha = np.clip(alpha, 0, 1)

    light_rng = np.random.default_rng(scene.light_seed)
    gy = np.linspace(-1, 1, h, dtype=np.float32)[:, None]
    gx = np.linspace(-1, 1, w, dtype=np.float32)[None, :]
    grad = 1 + 0.15 * (light_rng.uniform(-1, 1) * gx + light_rng.uniform(-1, 1) * gy)
    vign = 1 - 0.25 * (gx ** 2 + gy ** 2) * light_rng.uniform(0.3, 1)
    blotch = 0.85 + 0.3 * smooth_noise(light_rng, h, w, 24)
    bg = np.clip(scene.screen[None, None] * (grad * vign * blotch)[..., None], 0, 1)

    # Spill: green light bouncing onto the foreground, strongest just inside the edge.
    inner = gaussian_blur(alpha, 6.0)
    spill_w = scene.spill * np.clip(1.0 - inner, 0, 1) * (alpha > 0.02)
    spilled = fg * (1 - spill_w[..., None]) + np.array([fg.mean() * 0.6, 0.75, fg.mean() * 0.5], np.float32) * spill_w[..., None]

    plate = spilled * alpha[..., None] + bg * (1 - alpha[..., None])
    plate = plate + scene.noise * rng.standard_normal(plate.shape).astype(np.float32)
    plate = np.clip(plate, 0, 1)
    if scene.jpeg:
        buf = io.BytesIO()
        Image.fromarray((plate * 255 + 0.5).astype(np.uint8)).save(buf, format="JPEG", quality=scene.jpeg)
        plate = np.asarray(Image.open(io.BytesIO(buf.getvalue())), np.float32) / 255.0
    return plate.astype(np.float32), alpha, fg, bg


def make_hint(alpha: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A coarse matte as users make them: binarised, eroded/dilated, blurred, holes, blocky."""
    h, w = alpha.shape
    m = (alpha > 0.5).astype(np.float32)
    m = morph(m, int(rng.integers(-6, 9)))
    kind = rng.random()
    if kind < 0.2:  # blocky: rough rotoscope / low-res key
        f = int(rng.integers(4, 12))
        small = F.interpolate(_t(m)[None, None], size=(max(1, h // f), max(1, w // f)), mode="area")
        m = F.interpolate(small, size=(h, w), mode="bilinear", align_corners=False)[0, 0].numpy()
    if rng.random() < 0.3:  # holes
        for _ in range(rng.integers(1, 4)):
            cy, cx, r = rng.uniform(0, h), rng.uniform(0, w), rng.uniform(0.02, 0.08) * min(h, w)
            yy, xx = np.mgrid[0:h, 0:w]
            m = np.where(np.hypot(yy - cy, xx - cx) < r, 0.0, m).astype(np.float32)
    m = gaussian_blur(m, float(rng.uniform(1.0, 8.0)))
    return np.clip(m, 0, 1).astype(np.float32)


def generate(rng: np.random.Generator, h: int, w: int, scene: Scene | None = None):
    """One sample: dict(plate, hint, alpha, fg, background, scene)."""
    scene = scene or random_scene(rng, h, w)
    plate, alpha, fg, bg = render(scene, h, w, rng)
    return dict(plate=plate, hint=make_hint(alpha, rng), alpha=alpha, fg=fg, background=bg, scene=scene)


# ---------------------------------------------------------------------------------------

def _save8(path: str, img: np.ndarray):
    Image.fromarray((np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8)).save(path)


def _save16(path: str, img: np.ndarray):
    Image.fromarray((np.clip(img, 0, 1) * 65535 + 0.5).astype(np.uint16)).save(path)


def write_sample(out: str, name: str, s: dict):
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
    a = ap.parse_args(argv)
    w, h = (int(v) for v in a.size.lower().split("x"))
    for d in ("Input", "AlphaHint", "GT/alpha", "GT/fg"):
        os.makedirs(f"{a.out}/{d}", exist_ok=True)
    rng = np.random.default_rng(a.seed)
    torch.manual_seed(a.seed)
    base = random_scene(rng, h, w) if a.clip else None
    for i in range(a.frames):
        scene = move(base, 1.5 * i, 0.4 * i, 0.01 * i) if a.clip else None
        s = generate(rng, h, w, scene)
        write_sample(a.out, f"frame_{i + 1:04d}", s)
    print(f"wrote {a.frames} {'clip ' if a.clip else ''}frames {w}x{h} to {a.out} (seed {a.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
