#!/usr/bin/env python3
"""Measures `corridorkey-engine review`'s targets in Debian's chromium and makes the screenshot
of docs/review.md. Run by hand (docs/review.md has the numbers it printed, with the machine):

  tools/review_page.py CLI MAKE_CLIP WORK [--size 1920x1080] [--frames 16] [--screenshot docs/review.png]

CLI is build/apps/corridorkey-engine/corridorkey-engine, MAKE_CLIP build/tests/ck_make_clip.
It generates a clip in WORK, keys it (and the same with `--profile draft` into a compare
root), starts `review`, and times, in the page (performance.now, each up to the next animation
frame after the image is drawn):
  - first paint: navigation start (the token's redirect included) to the first frame drawn;
  - one frame step with the previews cached: -> after one pass over the clip, 15 steps;
  - a tweak to a new comp on screen: a despill change to its comp drawn, 10 changes after the
    first (which keys the frame with the loaded model, reported apart).
"""
import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from review_browser import Browser, Review  # noqa: E402

STEP = """async (n) => {
  const h = window.ckReview, out = [];
  for (let i = 0; i < n; i++) {
    const target = h.state.frame + 1, t0 = performance.now();
    document.dispatchEvent(new KeyboardEvent('keydown', { key: 'ArrowRight', bubbles: true }));
    await new Promise((done) => {
      const poll = () => (h.shown && h.shown.frame === target && h.shown.at >= t0
        ? requestAnimationFrame(() => done()) : requestAnimationFrame(poll));
      poll();
    });
    out.push(performance.now() - t0);
  }
  return out;
}"""

TWEAK = """async (values) => {
  const h = window.ckReview, out = [], s = document.getElementById('despill');
  for (const v of values) {
    const t0 = performance.now();
    s.value = v;
    s.dispatchEvent(new Event('input'));
    await new Promise((done) => {
      const poll = () => (h.shown && h.shown.tweak && h.shown.at >= t0 && h.tweak && h.tweak.despill === v
        ? requestAnimationFrame(() => done()) : requestAnimationFrame(poll));
      poll();
    });
    out.push([performance.now() - t0, h.tweak.timings]);
  }
  return out;
}"""


def summary(ms):
    return f"median {statistics.median(ms):.0f} ms, max {max(ms):.0f} ms (n={len(ms)})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cli")
    ap.add_argument("make_clip")
    ap.add_argument("work")
    ap.add_argument("--size", default="1920x1080")
    ap.add_argument("--frames", type=int, default=16)
    ap.add_argument("--screenshot", help="where the page's picture goes (docs/review.png)")
    ap.add_argument("--engine", nargs="*", default=["--device", "cpu", "--tune", "off"])
    a = ap.parse_args()
    clip = os.path.join(a.work, "shots", "sh010")
    draft = os.path.join(a.work, "draft")
    if not os.path.isdir(os.path.join(clip, "Output", "Comp")):
        subprocess.run([a.make_clip, clip, "--frames", str(a.frames), "--size", a.size, "--plate", "png",
                        "--hint", "png", "--soft-edge", "12"], check=True)
        subprocess.run([a.cli, "inference", clip, *a.engine, "--quiet"], check=True)
        subprocess.run([a.cli, "inference", clip, *a.engine, "--quiet", "--profile", "draft",
                        "--output-root", draft], check=True)
    rv = Review(a.cli, os.path.dirname(clip), *a.engine, "--compare-root", draft)
    try:
        with Browser() as b:
            page = b.page
            b.open(rv.url)
            first = page.evaluate("window.ckReview.shown.at")
            print(f"first paint: {first:.0f} ms from navigation start (clip {a.size}, plate view, fit)")
            page.keyboard.press("5")
            b.wait_shown(0, "comp")
            for i in range(1, a.frames):  # one pass: every preview made and decoded once
                b.scrub(i)
                b.wait_shown(i, "comp")
            b.scrub(0)
            b.wait_shown(0, "comp")
            page.wait_for_timeout(500)
            steps = page.evaluate(STEP, min(15, a.frames - 1))
            print(f"frame step, previews cached (comp view): {summary(steps)}")
            b.scrub(1)
            b.wait_shown(1, "comp")
            tweaks = page.evaluate(TWEAK, [6, 6.5, 7, 7.5, 8, 8.5, 9, 9.5, 10, 5.5, 5])
            print(f"first tweak (keys frame 2 with the loaded model): {tweaks[0][0]:.0f} ms, server {tweaks[0][1]}")
            rest = [t for t, _ in tweaks[1:]]
            print(f"tweak to a new comp on screen: {summary(rest)}")
            server = tweaks[1:]
            for k in ("post_ms", "display_ms", "encode_ms"):
                vals = [s.get(k) for _, s in server if s.get(k) is not None]
                if vals:
                    print(f"  server {k}: median {statistics.median(vals):.0f} ms")
            if a.screenshot:
                page.click("#zoom-fit")
                page.check("#wipe-on")
                page.locator("#wipe").evaluate("e => { e.value = 60; e.dispatchEvent(new Event('input')); }")
                b.wait_shown(1, "comp", "s.wipe === 0.6")
                page.mouse.move(700, 450)
                page.wait_for_timeout(500)
                page.screenshot(path=a.screenshot)
                print(f"wrote {a.screenshot}")
    finally:
        rv.stop()


if __name__ == "__main__":
    main()
