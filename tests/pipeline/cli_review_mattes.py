#!/usr/bin/env python3
"""`corridorkey-engine review` with a clip's garbage and holdout mattes (docs/review.md,
docs/clips.md "Garbage and holdout mattes"), through the real binary over raw HTTP.

  cli_review_mattes.py CLI WORKDIR SOURCE     (env CK_MAKE_CLIP: the synthetic clip generator)

Checks, each failing when the behaviour it names breaks:
  - the clip list says which mattes a clip has;
  - a tweak's Processed (over black and over white) has alpha exactly 0 under the one
    GarbageMatte/ file and exactly 1 under each frame's HoldoutMatte/ file;
  - the garbage file repainted elsewhere keys the kept frame again (the matte is part of the
    kept frame's identity) and the next tweak follows it; the same tweak again does not key;
  - a key from the page writes Matte/ exactly 0 and 1 there, and the matte view shows 0 and 255;
  - a HoldoutMatte/ with fewer files than frames is refused by a tweak (422, naming it); a
    garbage file that is a link out of the roots is refused by a tweak and a key (403).
The tiny random checkpoint is enough: the mattes' exact regions do not depend on weights.
"""
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from review_support import Review, check, make_clip, np  # noqa: E402
import cv2  # noqa: E402  (review_support set OPENCV_IO_ENABLE_OPENEXR first)

cli, work, src = sys.argv[1], sys.argv[2], sys.argv[3]
ENGINE = ["--device", "cpu", "--tune", "off", "--checkpoint",
          os.path.join(src, "checkpoints", "greenformer_tiny_random128.ts"), "--img-size", "128"]
W, H, N = 96, 54, 3
t_start = time.time()

shutil.rmtree(work, ignore_errors=True)
shots, outside = os.path.join(work, "shots"), os.path.join(work, "outside")
os.makedirs(outside)
m010, m020, m030 = (os.path.join(shots, n) for n in ("m010", "m020", "m030"))
for d in (m010, m020, m030):
    make_clip(d, "--frames", str(N), "--size", f"{W}x{H}", "--plate", "png", "--hint", "png", "--prefix", "m",
              "--digits", "1")


def region(x0, x1, y0, y1):
    r = np.zeros((H, W), bool)
    r[y0:y1, x0:x1] = True
    return r


def write_matte(path, white):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    check(cv2.imwrite(path, np.where(white, 255, 0).astype(np.uint8)), f"cannot write {path}")


garbage = region(0, 24, 0, 40)                        # one file for every frame
holdout = [region(56 + 4 * f, 72 + 4 * f, 12, 36) for f in range(N)]  # one per frame, moving
write_matte(os.path.join(m010, "GarbageMatte", "g.png"), garbage)
for f in range(N):
    write_matte(os.path.join(m010, "HoldoutMatte", f"h{f + 1}.png"), holdout[f])
for f in range(N - 1):  # one short: neither one file nor one per frame
    write_matte(os.path.join(m020, "HoldoutMatte", f"h{f + 1}.png"), holdout[f])
write_matte(os.path.join(outside, "g.png"), garbage)
os.makedirs(os.path.join(m030, "GarbageMatte"))
os.symlink(os.path.join(outside, "g.png"), os.path.join(m030, "GarbageMatte", "g.png"))

rv = Review(cli, shots, *ENGINE)
clips = {c["name"]: c for c in rv.get_json("/api/clips")["clips"]}
check(clips["m010"].get("mattes") == {"garbage": "one file for every frame", "holdout": f"{N} files"},
      f"the clip list's mattes: {clips['m010'].get('mattes')}")
check(clips["m020"]["mattes"]["garbage"] is None, f"m020 has no garbage matte: {clips['m020']['mattes']}")
cid = clips["m010"]["id"]


def tweak(clip, frame, bg):
    s, h, body = rv.post_json("/api/tweak", {"clip": clip, "frame": frame, "view": "processed", "bg": bg})
    check(s == 200, f"tweak of frame {frame} over {bg}: {s} {body[:300]!r}")
    im = cv2.imdecode(np.frombuffer(body, np.uint8), cv2.IMREAD_UNCHANGED)
    check(im is not None and im.shape[:2] == (H, W), f"tweak answer: {None if im is None else im.shape}")
    timings = json.loads({k.lower(): v for k, v in h.items()}["x-ck-timings"])
    return im.astype(np.int32), timings


def check_processed(frame, g, hold, what):
    """Processed over black and white: alpha 0 shows the background exactly (premultiplied
    colour 0), alpha 1 shows none of it."""
    black, t = tweak(cid, frame, "black")
    white, _ = tweak(cid, frame, "#ffffff")
    check((black[g] == 0).all() and (white[g] == 255).all(),
          f"{what}: frame {frame}: alpha is not exactly 0 under the garbage matte "
          f"(over black max {black[g].max()}, over white min {white[g].min()})")
    check((black[hold] == white[hold]).all(),
          f"{what}: frame {frame}: alpha is not exactly 1 under the holdout matte "
          f"(over black and white differ by up to {np.abs(black[hold] - white[hold]).max()})")
    return black, white, t


for f in range(N):
    check_processed(f, garbage, holdout[f], "tweak")
black, white, _ = check_processed(1, garbage, holdout[1], "tweak")
rest = ~garbage & ~holdout[1]
check((black[rest] != white[rest]).any(), "alpha is 1 everywhere outside the mattes: a weak test")

# Repainted elsewhere: the kept frame is keyed again and follows the new matte.
moved = region(0, W, 42, H)
write_matte(os.path.join(m010, "GarbageMatte", "g.png"), moved)
black, white, t = check_processed(1, moved, holdout[1], "repainted garbage")
check(t["keyed"], f"the repainted garbage matte did not key the frame again: {t}")
old = garbage & ~moved
check(((black[old] != 0) | (white[old] != 255)).any(),
      "the old garbage region is still exactly alpha 0 after the repaint: the tweak kept the old matte")
_, t = tweak(cid, 1, "black")
check(not t["keyed"], f"an unchanged frame was keyed again: {t}")

# A key from the page: the clip pipeline's Matte/, and the matte view, exactly 0 and 1.
s, _, body = rv.post_json("/api/key", {"clip": cid, "screen": "auto"})
check(s == 200, f"key: {s} {body[:300]!r}")
job = json.loads(body)["job"]
t0 = time.time()
while True:
    j = [j for j in rv.get_json("/api/jobs")["jobs"] if j["id"] == job][0]
    if j["state"] in ("done", "cancelled", "failed"):
        break
    check(time.time() - t0 < 300, f"key {job} did not end in 300 s: {j}")
    time.sleep(0.05)
check(j["state"] == "done" and j["frames_done"] == N and not j["failures"], f"key: {j}")
for f in range(N):
    path = os.path.join(m010, "Output", "Matte", f"m{f + 1}.exr")
    a = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    check(a is not None and a.shape[:2] == (H, W), f"cannot read {path}")
    a = a if a.ndim == 2 else a[:, :, 0]
    check((a[moved] == 0).all() and (a[holdout[f]] == 1).all(),
          f"{path}: not exactly 0 under the garbage and 1 under the holdout")
    s, _, body = rv.request("GET", f"/api/view?clip={cid}&frame={f}&view=matte")
    v = cv2.imdecode(np.frombuffer(body, np.uint8), cv2.IMREAD_UNCHANGED) if s == 200 else None
    check(v is not None and (v[moved] == 0).all() and (v[holdout[f]] == 255).all(),
          f"the matte view of frame {f}: {s}, not 0 under the garbage and 255 under the holdout")

# Refused: a matte folder of the wrong count, a matte that leads out of the roots.
s, _, body = rv.post_json("/api/tweak", {"clip": clips["m020"]["id"], "frame": 0, "view": "processed"})
check(s == 422 and b"HoldoutMatte" in body and b"2 frames" in body, f"a short HoldoutMatte/: {s} {body[:300]!r}")
for path in ("/api/tweak", "/api/key"):
    s, _, body = rv.post_json(path, {"clip": clips["m030"]["id"], "frame": 0, "view": "processed", "screen": "auto"})
    check(s == 403 and b"g.png" in body, f"{path} with a garbage matte that leads out: {s} {body[:300]!r}")
check(not os.path.exists(os.path.join(m030, "Output", "Matte")), "a refused key wrote mattes")

rv.stop()
print(f"cli review mattes: ok ({time.time() - t_start:.1f} s)")
