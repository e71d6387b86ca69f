#!/usr/bin/env python3
"""How good are the engine's generated hints, and what do they cost the final matte?

For every clip (a folder with Input/, AlphaHint/ and the ground truth GT/alpha/, as
tools/make_synthetic.py writes them) the engine keys the clip twice, into separate output
roots: once from the clip's own hints (`--hint files`: the coarse hints users draw) and once
from hints it generates (`--hint chroma`). Scored against GT/alpha, per frame, then averaged:

  hint (files)      the clip's own AlphaHint/ frames
  hint (chroma)     the generated hints, <out>/AlphaHint/*.png
  matte (files)     the engine's Matte/ keyed from the clip's hints
  matte (chroma)    the engine's Matte/ keyed from the generated hints

Metrics: SAD (sum of absolute differences / 1000, the matting papers' unit, per frame), MSE
(x 1e3) and the mean absolute error inside the transition band (0 < GT < 1) and outside it.

  python tools/evaluate_hints.py --engine build/apps/corridorkey-engine/corridorkey-engine \\
      --clip /tmp/held/c1 --clip /tmp/held/c2 [--engine-args "--color srgb"] [--json out.json]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

os.environ.setdefault("OPENCV_IO_ENABLE_OPENEXR", "1")
import cv2  # noqa: E402
import numpy as np  # noqa: E402


def read(path: str) -> np.ndarray:
    im = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    if im is None:
        raise SystemExit(f"{path}: cannot read")
    if im.ndim == 3:
        im = im[..., 0] if im.shape[2] in (1, 2) else im[..., :3].max(axis=2)
    if im.dtype == np.uint8:
        return im.astype(np.float64) / 255.0
    if im.dtype == np.uint16:
        return im.astype(np.float64) / 65535.0
    return im.astype(np.float64)


def frames(folder: str) -> list[str]:
    files = [f for f in glob.glob(os.path.join(folder, "*")) if not os.path.basename(f).startswith(".")]
    return sorted(files)


def score(pred: np.ndarray, gt: np.ndarray) -> dict:
    pred = np.clip(pred, 0.0, 1.0)
    if pred.shape != gt.shape:
        pred = cv2.resize(pred, (gt.shape[1], gt.shape[0]), interpolation=cv2.INTER_LINEAR)
    d = np.abs(pred - gt)
    band = (gt > 0.0) & (gt < 1.0)
    return {"sad": d.sum() / 1000.0, "mse": (d ** 2).mean() * 1e3,
            "band_mae": d[band].mean() if band.any() else 0.0,
            "solid_mae": d[~band].mean() if (~band).any() else 0.0}


def mean(rows: list[dict]) -> dict:
    return {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}


def key(engine: str, clip: str, out_root: str, hint: str, extra: list[str]) -> None:
    cmd = [engine, "inference", clip, "--hint", hint, "--output-root", out_root,
           "--outputs", "matte", "--quiet"] + extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(map(shlex.quote, cmd))} failed ({r.returncode}):\n{r.stderr}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", required=True, help="the corridorkey-engine binary")
    ap.add_argument("--clip", action="append", required=True, help="clip folder with GT/alpha (repeatable)")
    ap.add_argument("--engine-args", default="", help="extra inference flags, e.g. '--checkpoint F'")
    ap.add_argument("--json", help="write the table here")
    a = ap.parse_args(argv)
    extra = shlex.split(a.engine_args)
    rows = {k: [] for k in ("hint (files)", "hint (chroma)", "matte (files)", "matte (chroma)")}
    tmp = tempfile.mkdtemp(prefix="ck_hints_")
    try:
        for clip in a.clip:
            name = os.path.basename(os.path.normpath(clip))
            for hint in ("files", "chroma"):
                key(a.engine, clip, os.path.join(tmp, hint), hint, extra)
            gts = frames(os.path.join(clip, "GT", "alpha"))
            given = frames(os.path.join(clip, "AlphaHint"))
            made = frames(os.path.join(tmp, "chroma", name, "AlphaHint"))
            m_files = frames(os.path.join(tmp, "files", name, "Matte"))
            m_chroma = frames(os.path.join(tmp, "chroma", name, "Matte"))
            if not (len(gts) == len(given) == len(made) == len(m_files) == len(m_chroma)):
                raise SystemExit(f"{clip}: frame counts differ: GT {len(gts)}, hints {len(given)}, "
                                 f"generated {len(made)}, mattes {len(m_files)} / {len(m_chroma)}")
            for i, g in enumerate(gts):
                gt = read(g)
                rows["hint (files)"].append(score(read(given[i]), gt))
                rows["hint (chroma)"].append(score(read(made[i]), gt))
                rows["matte (files)"].append(score(read(m_files[i]), gt))
                rows["matte (chroma)"].append(score(read(m_chroma[i]), gt))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    table = {k: mean(v) for k, v in rows.items()}
    n = len(rows["hint (files)"])
    print(f"{n} frames of {len(a.clip)} clip(s)")
    print(f"{'':<16} {'SAD':>8} {'MSE e-3':>8} {'band MAE':>9} {'solid MAE':>10}")
    for k, v in table.items():
        print(f"{k:<16} {v['sad']:>8.3f} {v['mse']:>8.3f} {v['band_mae']:>9.4f} {v['solid_mae']:>10.4f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"frames": n, "clips": a.clip, "table": table}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
