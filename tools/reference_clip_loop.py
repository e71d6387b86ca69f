#!/usr/bin/env python3
"""The reference's clip loop in plain Python, for whole-process comparisons with
`corridorkey-engine inference` (docs/performance.md): the same clip folder layout,
the reference's pre-processing (torch bilinear + antialias resize, ImageNet normalisation),
the GreenFormer forward of tools/greenformer_ref.py, and the reference CPU path's OpenCV
post-processing (Lanczos-4 resize back, connected-component despeckle, average despill,
premultiply, checkerboard comp), writing FG / Matte / Processed EXRs and Comp PNGs.

  python tools/reference_clip_loop.py CLIP --checkpoint W.pth --img-size 1024 \
      [--precision float32|bfloat16|float16-autocast] [--channels-last] [--threads N]

float32 is what the current reference runs on a CPU (its precision "auto"; releases before
it autocast to float16: `float16-autocast`), and bfloat16 + --channels-last is the best
plain-PyTorch setting on CPUs with fast bf16. The forward runs under torch.inference_mode
with the reference's in-place ReLUs and residual adds (greenformer_ref.py). Prints the wall time per frame and in total; run it under /usr/bin/time -v for the
process's peak RSS.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time

os.environ.setdefault("OPENCV_IO_ENABLE_OPENEXR", "1")
import cv2  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import greenformer_ref as gr  # noqa: E402

MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def read(path: str) -> np.ndarray:
    im = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    if im is None:
        raise SystemExit(f"{path}: cannot read")
    scale = 65535.0 if im.dtype == np.uint16 else 255.0 if im.dtype == np.uint8 else 1.0
    im = im.astype(np.float32) / scale
    if im.ndim == 3:
        im = cv2.cvtColor(im[..., :3], cv2.COLOR_BGR2RGB)
    return im


def srgb_to_linear(x):
    x = np.clip(x, 0, None)
    return np.where(x <= 0.04045, x / 12.92, ((x + 0.055) / 1.055) ** 2.4)


def linear_to_srgb(x):
    x = np.clip(x, 0, None)
    return np.where(x <= 0.0031308, x * 12.92, 1.055 * x ** (1 / 2.4) - 0.055)


def despeckle(alpha: np.ndarray, size: int = 400) -> np.ndarray:
    mask = (alpha > 0.5).astype(np.uint8)
    n, labels, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
    keep = np.zeros(n, np.uint8)
    keep[1:] = stats[1:, cv2.CC_STAT_AREA] >= size
    kept = keep[labels] * 255
    kept = cv2.dilate(kept, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (51, 51)))
    kept = cv2.GaussianBlur(kept, (11, 11), 0)
    return alpha * (kept.astype(np.float32) / 255.0)


def despill(fg: np.ndarray, strength: float = 0.5) -> np.ndarray:
    r, g, b = fg[..., 0], fg[..., 1], fg[..., 2]
    spill = np.maximum(g - (r + b) / 2, 0)
    out = np.stack([r + spill / 2, g - spill, b + spill / 2], -1)
    return fg + (out - fg) * strength


def checker(h: int, w: int) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w]
    return np.where(((x // 128 + y // 128) % 2 == 0), 0.15, 0.55).astype(np.float32)[..., None]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("clip")
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--arch", default="hiera_base_plus", choices=sorted(gr.CONFIGS))
    ap.add_argument("--img-size", type=int, required=True)
    ap.add_argument("--precision", default="float32",
                    choices=("float32", "bfloat16", "float16-autocast"))
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.set_grad_enabled(False)
    t_start = time.perf_counter()
    model = gr.build_greenformer(a.arch, a.img_size)
    gr.load_corridorkey_pth(model, a.checkpoint)
    model.eval()
    if a.precision == "bfloat16":
        model = model.to(torch.bfloat16)
    if a.channels_last:
        model = model.to(memory_format=torch.channels_last)
    plates = sorted(glob.glob(os.path.join(a.clip, "Input", "*")))
    hints = sorted(glob.glob(os.path.join(a.clip, "AlphaHint", "*")))
    out = os.path.join(a.clip, "Output")
    for d in ("FG", "Matte", "Processed", "Comp"):
        os.makedirs(os.path.join(out, d), exist_ok=True)
    S = a.img_size
    for pp, hp in zip(plates, hints):
        t0 = time.perf_counter()
        img, hint = read(pp), read(hp)
        if hint.ndim == 3:
            hint = hint[..., 0]
        h, w = img.shape[:2]
        x = torch.from_numpy(img).permute(2, 0, 1)[None]
        hh = torch.from_numpy(hint)[None, None]
        x = F.interpolate(x, size=(S, S), mode="bilinear", align_corners=False, antialias=True)
        hh = F.interpolate(hh, size=(S, S), mode="bilinear", align_corners=False, antialias=True)
        x = (x - torch.from_numpy(MEAN).view(1, 3, 1, 1)) / torch.from_numpy(STD).view(1, 3, 1, 1)
        inp = torch.cat([x, hh], 1)
        if a.precision == "bfloat16":
            inp = inp.to(torch.bfloat16)
        if a.channels_last:
            inp = inp.contiguous(memory_format=torch.channels_last)
        # As the reference's process_frame: under inference_mode; on a CPU its precision
        # "auto" is float32 with no autocast (older releases autocast to float16).
        with torch.inference_mode():
            if a.precision == "float16-autocast":
                with torch.autocast("cpu", dtype=torch.float16):
                    res = model(inp)
            else:
                res = model(inp)
        alpha = res[11][0, 0].float().numpy()
        fg = res[12][0].float().permute(1, 2, 0).numpy()
        alpha = cv2.resize(alpha, (w, h), interpolation=cv2.INTER_LANCZOS4)
        fg = cv2.resize(fg, (w, h), interpolation=cv2.INTER_LANCZOS4)
        clean = despeckle(alpha)
        fg_lin = srgb_to_linear(despill(fg))
        processed = np.concatenate([fg_lin * clean[..., None], clean[..., None]], -1)
        bg = srgb_to_linear(checker(h, w))
        comp = linear_to_srgb(fg_lin * alpha[..., None] + bg * (1 - alpha[..., None]))
        stem = os.path.splitext(os.path.basename(pp))[0]
        half = [cv2.IMWRITE_EXR_TYPE, cv2.IMWRITE_EXR_TYPE_HALF]
        cv2.imwrite(os.path.join(out, "FG", stem + ".exr"), cv2.cvtColor(fg, cv2.COLOR_RGB2BGR), half)
        cv2.imwrite(os.path.join(out, "Matte", stem + ".exr"), alpha, half)
        cv2.imwrite(os.path.join(out, "Processed", stem + ".exr"),
                    cv2.cvtColor(processed.astype(np.float32), cv2.COLOR_RGBA2BGRA), half)
        cv2.imwrite(os.path.join(out, "Comp", stem + ".png"),
                    cv2.cvtColor((np.clip(comp, 0, 1) * 255).astype(np.uint8), cv2.COLOR_RGB2BGR))
        print(f"{stem}: {time.perf_counter() - t0:.2f} s", flush=True)
    print(f"total {time.perf_counter() - t_start:.2f} s for {len(plates)} frames")
    return 0


if __name__ == "__main__":
    sys.exit(main())
