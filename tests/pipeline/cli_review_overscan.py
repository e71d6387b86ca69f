#!/usr/bin/env python3
"""`corridorkey-engine review` with an overscan EXR plate (docs/review.md, docs/clips.md
"What carries over from the plate"), through the real binary over raw HTTP.

  cli_review_overscan.py CLI WORKDIR SOURCE     (env CK_MAKE_CLIP: the synthetic clip generator)

The plate is cli_plate_metadata.py's: anamorphic 2:1, 64 px of overscan on each side of a
256x128 display window, timecode 01:00:00:01 (frame 2: 01:00:00:02), 24 fps and a custom
string attribute, written by OpenEXR's Python package; two frames. Checks, each failing when
the behaviour it names breaks:
  - a key from the page (/api/key) writes Matte, FG and Processed EXRs with the plate's data
    and display windows, pixelAspectRatio, timeCode, framesPerSecond and custom attribute
    (read back by OpenEXR and by OpenImageIO), the overscan keyed; a Write (/api/write)
    rewrites Processed with them too;
  - the plate, matte, FG and Processed views are the display window (docs/clips.md: "review
    shows outputs in their display window"), each equal within 1 LSB to the display window
    of its file, neither stretched nor shifted; the probe's coordinates are the display
    window's (its values are the files' at the same place; past it, 400);
  - the comp and hint views and a tweak's answer are the display window, or (KNOWN below)
    the whole keyed frame, never any other size: either way the display window's pixels
    are the file's (the tweak's: the written key's) at the display window's place.
The tiny random checkpoint is enough: windows and attributes do not depend on weights.
"""
import fractions
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from review_support import Review, check, levels, make_clip, max_diff, np, read, srgb_encode  # noqa: E402
import cv2  # noqa: E402  (review_support set OPENCV_IO_ENABLE_OPENEXR first)
import OpenEXR  # noqa: E402
import OpenImageIO as oiio  # noqa: E402

cli, work, src = sys.argv[1], sys.argv[2], sys.argv[3]
ENGINE = ["--device", "cpu", "--tune", "off", "--checkpoint",
          os.path.join(src, "checkpoints", "greenformer_tiny_random128.ts"), "--img-size", "128"]
DW, DH, OS = 256, 128, 64            # display window, overscan on each side (cli_plate_metadata.py)
FW, FH = DW + 2 * OS, DH + 2 * OS    # the keyed frame (the data window)
DISP = (slice(OS, OS + DH), slice(OS, OS + DW))  # the display window inside the keyed frame
CUSTOM = "shot sh010, take 3"
N = 2
# Views that review may serve at the whole keyed frame (the data window) rather than the
# display window that docs/clips.md promises: none. The Comp PNG and the generated hint are
# cut by the plate's header (plate_display_window), a tweak by its RawFrame's (display_window).
KNOWN_DATA_WINDOW = set()
t_start = time.time()

shutil.rmtree(work, ignore_errors=True)
gen = os.path.join(work, "gen")
make_clip(gen, "--frames", str(N), "--size", f"{FW}x{FH}", "--plate", "png", "--hint", "png")
clip = os.path.join(work, "shots", "ov010")
os.makedirs(os.path.join(clip, "Input"))
plates = []
for f in range(N):
    rgb = cv2.imread(os.path.join(gen, "Input", f"{f + 1:04d}.png"), cv2.IMREAD_UNCHANGED)
    rgb = np.ascontiguousarray(rgb[:, :, ::-1].astype(np.float32) / 255)
    plates.append(rgb)
    tc = OpenEXR.TimeCode()
    tc.hours, tc.minutes, tc.seconds, tc.frame = 1, 0, 0, f + 1
    header = {
        "compression": OpenEXR.ZIP_COMPRESSION,
        "type": OpenEXR.scanlineimage,
        "dataWindow": (np.array([-OS, -OS], np.int32), np.array([DW + OS - 1, DH + OS - 1], np.int32)),
        "displayWindow": (np.array([0, 0], np.int32), np.array([DW - 1, DH - 1], np.int32)),
        "pixelAspectRatio": 2.0,
        "timeCode": tc,
        "framesPerSecond": fractions.Fraction(24, 1),
        "capturedShot": CUSTOM,
    }
    with OpenEXR.File(header, {"RGB": rgb}) as fh:
        fh.write(os.path.join(clip, "Input", f"{f + 1:04d}.exr"))


def exr(path):
    with OpenEXR.File(path, separate_channels=True) as fh:  # copies: closing clears them
        return dict(fh.header()), {k: v.pixels.astype(np.float32) for k, v in fh.channels().items()}


def check_metadata(path, frame, what):
    """cli_plate_metadata.py's check_metadata (OpenEXR and OpenImageIO); the channels."""
    check(os.path.exists(path), f"{what}: no {path}")
    h, ch = exr(path)
    dw, dp = h["dataWindow"], h["displayWindow"]
    check(tuple(dw[0]) == (-OS, -OS) and tuple(dw[1]) == (DW + OS - 1, DH + OS - 1), f"{what}: data window {dw}")
    check(tuple(dp[0]) == (0, 0) and tuple(dp[1]) == (DW - 1, DH - 1), f"{what}: display window {dp}")
    check(abs(h.get("pixelAspectRatio", 0) - 2.0) < 1e-6, f"{what}: pixelAspectRatio {h.get('pixelAspectRatio')}")
    tc = h.get("timeCode")
    check(tc is not None and (tc.hours, tc.minutes, tc.seconds, tc.frame) == (1, 0, 0, frame + 1),
          f"{what}: timeCode {tc}")
    check(h.get("framesPerSecond") == fractions.Fraction(24, 1), f"{what}: framesPerSecond {h.get('framesPerSecond')}")
    check(h.get("capturedShot") == CUSTOM, f"{what}: custom attribute {h.get('capturedShot')!r}")
    spec = oiio.ImageInput.open(path).spec()
    check((spec.x, spec.y, spec.width, spec.height) == (-OS, -OS, FW, FH),
          f"{what}: OIIO data window {spec.x},{spec.y} {spec.width}x{spec.height}")
    check((spec.full_x, spec.full_y, spec.full_width, spec.full_height) == (0, 0, DW, DH),
          f"{what}: OIIO display window")
    check(abs(spec.get_float_attribute("PixelAspectRatio") - 2.0) < 1e-6, f"{what}: OIIO PixelAspectRatio")
    check(spec.get_string_attribute("smpte:TimeCode") == f"01:00:00:{frame + 1:02d}",
          f"{what}: OIIO timecode {spec.get_string_attribute('smpte:TimeCode')!r}")
    for c in ch.values():
        check(c.shape == (FH, FW), f"{what}: a channel of {c.shape}, not the data window's {(FH, FW)}")
    return ch


def decode(body):
    im = cv2.imdecode(np.frombuffer(body, np.uint8), cv2.IMREAD_UNCHANGED)
    check(im is not None, f"not an image: {body[:200]!r}")
    return im[:, :, ::-1] if im.ndim == 3 else im  # RGB


def view(frame, name, **extra):
    q = "&".join(f"{k}={v}" for k, v in {"clip": cid, "frame": frame, "view": name, **extra}.items())
    s, _, body = rv.request("GET", "/api/view?" + q)
    check(s == 200, f"the {name} view of frame {frame}: {s} {body[:300]!r}")
    return decode(body)


def display_part(im, what, kind):
    """The display window of a served image: the image itself, or (a view in
    KNOWN_DATA_WINDOW) its display window's place in the whole keyed frame. Any other size:
    cropped or stretched wrongly."""
    if im.shape[:2] == (DH, DW):
        return im
    check(kind in KNOWN_DATA_WINDOW and im.shape[:2] == (FH, FW),
          f"{what}: {im.shape[1]}x{im.shape[0]}, not the display window's {DW}x{DH}")
    return im[DISP]


rv = Review(cli, os.path.join(work, "shots"), *ENGINE)
clips = {c["name"]: c for c in rv.get_json("/api/clips")["clips"]}
check(clips.get("ov010", {}).get("frames") == N, f"the clip list: {clips}")
cid = clips["ov010"]["id"]

# The plate view before any key: the display window, the plate as it is (sRGB by default).
for f in range(N):
    p = view(f, "plate")
    check(p.shape == (DH, DW, 3), f"the plate view of frame {f}: {p.shape}, not the display window {DW}x{DH}")
    d = max_diff(p, levels(plates[f][DISP]))
    check(d <= 1, f"the plate view of frame {f} is not the plate's display window (max difference {d} levels)")

# A tweak before any key: keyed on the loaded model, shown whole or as the display window.
tweaks = {}
for name in ("processed", "comp"):
    s, _, body = rv.post_json("/api/tweak", {"clip": cid, "frame": 0, "view": name, "bg": "black"})
    check(s == 200, f"tweak {name}: {s} {body[:300]!r}")
    tweaks[name] = display_part(decode(body), f"the tweak's {name}", "tweak")


def wait(job):
    t0 = time.time()
    while True:
        j = [j for j in rv.get_json("/api/jobs")["jobs"] if j["id"] == job][0]
        if j["state"] in ("done", "cancelled", "failed"):
            return j
        check(time.time() - t0 < 300, f"job {job} did not end in 300 s: {j}")
        time.sleep(0.05)


# A key from the page: every EXR output carries the plate's header; the overscan is keyed.
s, _, body = rv.post_json("/api/key", {"clip": cid, "screen": "auto"})
check(s == 200, f"key: {s} {body[:300]!r}")
j = wait(json.loads(body)["job"])
check(j["state"] == "done" and j["frames_done"] == N and not j["failures"], f"key: {j}")
out = os.path.join(clip, "Output")
files = {}
for f in range(N):
    for kind in ("Matte", "FG", "Processed"):
        files[kind, f] = check_metadata(os.path.join(out, kind, f"{f + 1:04d}.exr"), f, f"key {kind} frame {f}")
    y = files["Matte", f]["Y"]
    ring = np.concatenate([y[:OS].ravel(), y[-OS:].ravel(), y[:, :OS].ravel(), y[:, -OS:].ravel()])
    check(np.isfinite(y).all() and ring.max() > 0, f"frame {f}: overscan not keyed (alpha empty outside the display)")

# The views of the written outputs: each the display window of its file.
for f in range(N):
    m = view(f, "matte")
    check(m.shape == (DH, DW), f"the matte view of frame {f}: {m.shape}, not the display window")
    d = max_diff(m, levels(files["Matte", f]["Y"][DISP]))
    check(d <= 1, f"the matte view of frame {f} is not the Matte file's display window (max difference {d})")
    pr = view(f, "processed", bg="black")
    check(pr.shape == (DH, DW, 3), f"the processed view of frame {f}: {pr.shape}, not the display window")
    ch = files["Processed", f]
    lin = np.stack([ch["R"], ch["G"], ch["B"]], -1)[DISP]
    d = max_diff(pr, levels(srgb_encode(lin)))
    check(d <= 1, f"the processed view of frame {f} over black is not the Processed file's display window ({d})")
    fg = view(f, "fg", bg="black")
    check(fg.shape == (DH, DW, 3), f"the FG view of frame {f}: {fg.shape}, not the display window")
    comp = display_part(view(f, "comp"), f"the comp view of frame {f}", "comp")
    comp_file = read(os.path.join(out, "Comp", f"{f + 1:04d}.png"))
    check(comp_file.shape[:2] == (FH, FW), f"the Comp PNG of frame {f}: {comp_file.shape}, not the keyed frame")
    d = max_diff(comp, levels(comp_file[DISP]))
    check(d == 0, f"the comp view of frame {f} is not the Comp PNG at the display window's place ({d})")
    hint = display_part(view(f, "hint"), f"the hint view of frame {f}", "hint")
    hint_file = read(os.path.join(out, "AlphaHint", f"{f + 1:04d}.png"))
    hint_file = hint_file if hint_file.ndim == 2 else hint_file[:, :, 0]
    check(hint_file.shape == (FH, FW), f"the generated hint of frame {f}: {hint_file.shape}, not the keyed frame")
    d = max_diff(hint, levels(hint_file[DISP]))
    check(d == 0, f"the hint view of frame {f} is not the generated hint at the display window's place ({d})")

# The tweak keyed frame 0 as the key did: its display window is the written key's.
d = max_diff(tweaks["processed"], view(0, "processed", bg="black"))
check(d <= 1, f"the tweak's processed differs from the key's Processed view at the display window ({d} levels)")
d = max_diff(tweaks["comp"], display_part(view(0, "comp"), "the comp view of frame 0", "comp"))
check(d <= 1, f"the tweak's comp differs from the key's Comp at the display window ({d} levels)")

# The probe: display-window coordinates, the files' values at the same place.
for x, y in ((0, 0), (DW - 1, DH - 1), (DW // 2, DH // 3)):
    r = rv.get_json(f"/api/probe?clip={cid}&frame=1&x={x}&y={y}")
    want = plates[1][OS + y, OS + x]
    check(np.allclose(r["plate"], want, atol=1e-6), f"probe ({x}, {y}): plate {r['plate']}, the file has {want}")
    a = files["Matte", 1]["Y"][OS + y, OS + x]
    check(abs(r.get("alpha", -1) - a) < 1e-6, f"probe ({x}, {y}): alpha {r.get('alpha')}, the Matte file has {a}")
s, _, body = rv.request("GET", f"/api/probe?clip={cid}&frame=1&x={DW}&y=0")
check(s == 400 and f"{DW}x{DH}".encode() in body, f"a probe past the display window: {s} {body[:200]!r}")

# Write: Processed and Comp rewritten with the settings, the header carried again.
before = os.stat(os.path.join(out, "Processed", "0001.exr")).st_mtime_ns
s, _, body = rv.post_json("/api/write", {"clip": cid, "despill": 8})
check(s == 200, f"write: {s} {body[:300]!r}")
j = wait(json.loads(body)["job"])
check(j["state"] == "done" and not j["failures"], f"write: {j}")
check(os.stat(os.path.join(out, "Processed", "0001.exr")).st_mtime_ns != before, "write did not rewrite Processed")
for f in range(N):
    check_metadata(os.path.join(out, "Processed", f"{f + 1:04d}.exr"), f, f"write Processed frame {f}")

rv.stop()
print(f"cli review overscan: ok ({time.time() - t_start:.1f} s)")
