#!/usr/bin/env python3
"""Score the mattes of several engine runs of the same clips against the true alpha, side by
side, with the metrics of tools/evaluate.py (SAD, MSE, Grad, Conn), and draw one picture:
plate, each run's matte, truth, and |last run - first run| amplified.

  corridorkey-engine inference CLIP --output-root /tmp/full  --quiet
  corridorkey-engine inference CLIP --output-root /tmp/draft --profile draft --quiet
  python tools/compare_mattes.py --clip CLIP --run full=/tmp/full --run draft=/tmp/draft \
      --json docs/metrics_draft.json --picture docs/draft_vs_full.png

A run is NAME=ROOT, where ROOT holds <clip name>/Matte/<stem>.exr (the engine's
--output-root layout); ROOT may also be the word `inplace` for <clip>/Output/Matte. Clips
are folders with Input/, AlphaHint/ and GT/alpha/ (tools/make_synthetic.py, evaluate.py
--make-heldout, samples/greenscreen_demo). The ratio column is each run's metric over the
first run's, pooled over every frame of every clip.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import evaluate as ev  # noqa: E402

cv2 = ev.cv2
METRICS = ("sad", "mse", "grad", "conn", "mse_semi", "mse_solid")


def scores(alpha: np.ndarray, gt: np.ndarray, full: bool = True) -> dict:
    """evaluate.py's four metrics (full=False: SAD and MSE only, Grad and Conn as NaN; the
    connectivity metric is most of the time), plus the MSE split by the truth: over
    semi-transparent pixels (0.02 < gt < 0.98: soft edges, strands, motion blur) and the rest."""
    if full:
        m = ev.metrics(alpha, gt)
    else:
        d = alpha.astype(np.float64) - gt
        m = dict(sad=float(np.abs(d).sum() / 1000), mse=float((d * d).mean()),
                 grad=float("nan"), conn=float("nan"))
    semi = (gt > 0.02) & (gt < 0.98)
    err = (alpha - gt) ** 2
    m["mse_semi"] = float(err[semi].mean()) if semi.any() else 0.0
    m["mse_solid"] = float(err[~semi].mean()) if (~semi).any() else 0.0
    return m


def matte_path(root: str, clip: str, stem: str) -> str:
    name = os.path.basename(os.path.normpath(clip))
    if root == "inplace":
        return f"{clip}/Output/Matte/{stem}.exr"
    return f"{root}/{name}/Matte/{stem}.exr"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clip", action="append", required=True, help="clip folder with GT/alpha (repeatable)")
    ap.add_argument("--run", action="append", required=True, help="NAME=ROOT (repeatable; the first is the base)")
    ap.add_argument("--json", help="write the table here")
    ap.add_argument("--picture", help="PNG: plate, each run's matte, truth, |last - first| x4 (first clip, first frame)")
    ap.add_argument("--picture-frame", type=int, default=0, help="frame index of the picture (default 0)")
    ap.add_argument("--metrics", choices=("all", "mse"), default="all",
                    help="mse: SAD and MSE only (seconds instead of minutes; what a test gate needs)")
    a = ap.parse_args(argv)
    runs = []
    for r in a.run:
        name, sep, root = r.partition("=")
        if not sep or not name or not root:
            ap.error(f"--run {r!r}: expected NAME=ROOT")
        runs.append((name, root))
    if len(runs) < 2:
        ap.error("give at least two --run")

    result = {"runs": dict(runs), "clips": {}, "pooled": {}}
    pooled = {n: [] for n, _ in runs}
    pic = None
    print(f"{'clip':24s} {'run':10s} {'SAD':>8s} {'MSE':>9s} {'Grad':>8s} {'Conn':>8s} {'MSE semi':>9s} {'MSE solid':>9s}")
    for ci, clip in enumerate(a.clip):
        cname = os.path.basename(os.path.normpath(clip))
        rows = {n: [] for n, _ in runs}
        for fi, (stem, plate, _hint, gt, linear) in enumerate(ev.clip_frames(clip)):
            mattes = []
            for n, root in runs:
                p = matte_path(root, clip, stem)
                if not os.path.isfile(p):
                    raise SystemExit(f"{p}: missing (run {n} did not key {cname}/{stem})")
                al = ev.read_image(p)
                if al.ndim == 3:
                    al = al[..., 0]
                if al.shape != gt.shape:
                    raise SystemExit(f"{p}: {al.shape} does not match the truth's {gt.shape}")
                rows[n].append(scores(al, gt, a.metrics == "all"))
                mattes.append(al)
            if ci == 0 and fi == a.picture_frame:
                srgb = ev.ms.linear_to_srgb(plate) if linear else plate
                pic = (srgb, mattes, gt)
        table = {n: {q: float(np.mean([r[q] for r in v])) for q in METRICS} for n, v in rows.items()}
        result["clips"][cname] = dict(frames=len(rows[runs[0][0]]), metrics=table)
        for n, t in table.items():
            pooled[n].extend(rows[n])
            print(f"{cname:24s} {n:10s} {t['sad']:8.3f} {t['mse']:9.5f} {t['grad']:8.3f} {t['conn']:8.3f}"
                  f" {t['mse_semi']:9.5f} {t['mse_solid']:9.5f}")
    base = runs[0][0]
    pt = {n: {q: float(np.mean([r[q] for r in v])) for q in METRICS} for n, v in pooled.items()}
    for n, t in pt.items():
        ratio = {q: (t[q] / pt[base][q] if pt[base][q] > 0 else float("nan")) for q in METRICS}
        result["pooled"][n] = dict(frames=len(pooled[n]), metrics=t, ratio_to_first=ratio)
        print(f"{'all clips':24s} {n:10s} {t['sad']:8.3f} {t['mse']:9.5f} {t['grad']:8.3f} {t['conn']:8.3f}"
              f" {t['mse_semi']:9.5f} {t['mse_solid']:9.5f}   MSE {ratio['mse']:.3f}x {base}"
              f" (semi {ratio['mse_semi']:.3f}x, solid {ratio['mse_solid']:.3f}x)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    if a.picture and pic:
        srgb, mattes, gt = pic
        panels = [ev.panel(srgb, "plate")]
        panels += [ev.panel(m, f"matte: {n}") for m, (n, _) in zip(mattes, runs)]
        panels.append(ev.panel(gt, "truth"))
        diff = np.clip(np.abs(mattes[-1] - mattes[0]) * 4, 0, 1)
        panels.append(ev.panel(diff, f"|{runs[-1][0]} - {runs[0][0]}| x4"))
        cv2.imwrite(a.picture, np.concatenate(panels, 1))
        print(f"wrote {a.picture}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
