"""What a Python call of Engine.process_frame costs beyond the engine's own work.

    python tools/bench_python_overhead.py --checkpoint W.pth [--img-size 512] [--frames 10]
        [--size 1920x1080]

Keys one seeded plate --frames times after a warm-up and prints, per call, the Python wall
time, the C++ time inside the call (timings["call_ms"]: every stage, with the GIL
released) and their difference, the binding's share (argument checks, views, the result
dict and arrays): medians over the frames. docs/python.md quotes it.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import corridorkey


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--img-size", type=int, default=512)
    ap.add_argument("--frames", type=int, default=10)
    ap.add_argument("--size", default="1920x1080")
    a = ap.parse_args()
    w, h = (int(x) for x in a.size.split("x"))
    rng = np.random.default_rng(0)
    plate = np.empty((h, w, 3), np.uint8)
    plate[:] = (40, 190, 60)  # a green backing
    yy, xx = np.mgrid[:h, :w]
    subject = (yy - h / 2) ** 2 / (h / 3) ** 2 + (xx - w / 2) ** 2 / (w / 5) ** 2 < 1
    plate[subject] = rng.integers(60, 200, (int(subject.sum()), 3), dtype=np.uint8)
    hint = (subject * 255).astype(np.uint8)
    engine = corridorkey.Model.load(a.checkpoint, img_size=a.img_size).engine()
    engine.process_frame(plate, hint)
    walls, inner = [], []
    for _ in range(a.frames):
        t0 = time.perf_counter()
        r = engine.process_frame(plate, hint)
        walls.append((time.perf_counter() - t0) * 1000)
        inner.append(r["timings"]["call_ms"])
    diff = [x - y for x, y in zip(walls, inner)]
    wm, im, dm = statistics.median(walls), statistics.median(inner), statistics.median(diff)
    print(f"{engine.info()['arch']} at {a.img_size}, {w}x{h} uint8 plate, {engine.info()['precision']}: "
          f"Python call {wm:.1f} ms, C++ inside it {im:.1f} ms, binding {dm:.2f} ms = {100 * dm / wm:.3f}% "
          f"(medians of {a.frames})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
