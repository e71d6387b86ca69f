#!/usr/bin/env python3
"""Colour management through the real binary (docs/colour.md), on plates made by real tools:
scene-linear EXRs (ck_make_clip), re-encoded to LogC3 / ACES AP0 by OpenColorIO's own Python
bindings (ocio_encode.py), a 10-bit log DPX written by oiiotool.

  cli_colour.py CLI WORKDIR SOURCE_DIR      (CK_MAKE_CLIP: the test clip generator)
"""
import json
import os
import shutil
import subprocess
import sys

os.environ["OPENCV_IO_ENABLE_OPENEXR"] = "1"
import cv2  # noqa: E402
import numpy as np  # noqa: E402

cli, work, src = sys.argv[1], sys.argv[2], sys.argv[3]
here = os.path.dirname(os.path.abspath(__file__))
model = ["--checkpoint", os.path.join(src, "checkpoints", "greenformer_tiny_random128.ts"),
         "--img-size", "128", "--device", "cpu", "--profile", "original"]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
failures = []


def fail(msg):
    print("FAIL:", msg)
    failures.append(msg)


def run(args, env=None, expect=0):
    e = dict(os.environ)
    e.pop("OCIO", None)
    e.update(env or {})
    p = subprocess.run([cli] + args, capture_output=True, text=True, env=e)
    if p.returncode != expect:
        fail(f"{' '.join(args)}: exit {p.returncode}, expected {expect}: {p.stderr[-800:]}")
    return p


def key(clip, out, *extra, env=None):
    """Keys `clip` into `out` with --json; returns the NDJSON events."""
    p = run(["inference", clip, "--output-root", out, "--json"] + model + list(extra), env=env)
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


def read(path):
    im = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    if im is None:
        raise RuntimeError(f"cannot read {path}")
    return im.astype(np.float32)


def outputs(out, clip="clip"):
    d = os.path.join(out, clip)
    return {k: read(os.path.join(d, k, f)) for k in ("Matte", "FG", "Processed", "Comp")
            for f in sorted(os.listdir(os.path.join(d, k)))[:1]}


def chromaticities(path):
    info = subprocess.run(["oiiotool", "--info", "-v", path], capture_output=True, text=True).stdout
    for line in info.splitlines():
        if line.strip().startswith("chromaticities:"):
            return [float(x) for x in line.split(":", 1)[1].split(",")]
    return None


def ocio_encode(target, rgb):
    """rgb float32 [H,W,3] (RGB order) through ocio_encode.py (the system python's OCIO)."""
    text = "\n".join(" ".join(repr(float(v)) for v in px) for px in rgb.reshape(-1, 3))
    p = subprocess.run(["/usr/bin/python3", os.path.join(here, "ocio_encode.py"), target],
                       input=text, capture_output=True, text=True, check=True)
    return np.array([float(v) for v in p.stdout.split()], np.float32).reshape(rgb.shape)


def reencode_clip(src_clip, dst_clip, target, ext=".exr"):
    shutil.copytree(os.path.join(src_clip, "AlphaHint"), os.path.join(dst_clip, "AlphaHint"))
    os.makedirs(os.path.join(dst_clip, "Input"))
    for f in sorted(os.listdir(os.path.join(src_clip, "Input"))):
        bgr = read(os.path.join(src_clip, "Input", f))[..., :3]
        enc = ocio_encode(target, bgr[..., ::-1].copy())
        cv2.imwrite(os.path.join(dst_clip, "Input", f), enc[..., ::-1].copy(),
                    [cv2.IMWRITE_EXR_TYPE, cv2.IMWRITE_EXR_TYPE_FLOAT])


def max_err(a, b):
    return float(np.max(np.abs(a - b)))


# The scene-linear clip: 2 frames, float EXR plates, PNG hints.
lin = os.path.join(work, "clip")
subprocess.run([os.environ["CK_MAKE_CLIP"], lin, "--frames", "2", "--size", "160x90", "--plate", "exr",
                "--hint", "png"], check=True)

# 1. linear-rec709 is exactly today's --linear: every output bit-identical.
key(lin, f"{work}/out_linear", "--linear")
ev = key(lin, f"{work}/out_lin709", "--input-colorspace", "linear-rec709")
a, b = outputs(f"{work}/out_linear"), outputs(f"{work}/out_lin709")
for k in a:
    if not np.array_equal(a[k], b[k]):
        fail(f"--input-colorspace linear-rec709 changed {k} (max diff {max_err(a[k], b[k])})")
started = [e["message"] for e in ev if e["event"] == "clip_started"]
if not started or "linear-rec709 (--input-colorspace)" not in started[0]:
    fail(f"clip line does not say what was chosen and why: {started}")
print("linear-rec709 == --linear: bit-identical")

# 2. LogC3 EI800 / AWG float EXRs (encoded by OCIO's Python) key to the linear clip's matte.
logc = os.path.join(work, "logc", "clip")
reencode_clip(lin, logc, "logc3")
key(logc, f"{work}/out_logc", "--input-colorspace", "arri-logc3-ei800-awg")
c = outputs(f"{work}/out_logc")
err = max_err(c["Matte"], a["Matte"])
print(f"LogC3 float EXR vs linear: matte max abs error {err:.2e} (bound 1e-3)")
if err > 1e-3:
    fail(f"LogC3 matte differs from the linear clip's by {err}")
proc = os.path.join(f"{work}/out_logc", "clip", "Processed", sorted(os.listdir(f"{work}/out_logc/clip/Processed"))[0])
xy = chromaticities(proc)
if not xy or abs(xy[0] - 0.6840) > 1e-4 or abs(xy[5] + 0.1020) > 1e-4:
    fail(f"Processed of a LogC3 plate should be linear AWG3, chromaticities {xy}")

# 3. The same plates as 10-bit log DPX (oiiotool): what 10-bit quantisation costs.
dpx = os.path.join(work, "dpx", "clip")
shutil.copytree(os.path.join(logc, "AlphaHint"), os.path.join(dpx, "AlphaHint"))
os.makedirs(os.path.join(dpx, "Input"))
for f in sorted(os.listdir(os.path.join(logc, "Input"))):
    subprocess.run(["oiiotool", os.path.join(logc, "Input", f), "-d", "uint10", "--attrib", "oiio:ColorSpace",
                    "KodakLog", "-o", os.path.join(dpx, "Input", f.replace(".exr", ".dpx"))], check=True)
key(dpx, f"{work}/out_dpx", "--input-colorspace", "arri-logc3-ei800-awg")
d = outputs(f"{work}/out_dpx")
err = max_err(d["Matte"], c["Matte"])
print(f"10-bit LogC3 DPX vs float LogC3 EXR: matte max abs error {err:.4f} (bound 0.05)")
if err > 0.05:
    fail(f"10-bit DPX matte differs from the float LogC EXR's by {err}")
ev = key(dpx, f"{work}/out_dpx_auto", "--input-colorspace", "auto")
warn = [e.get("message", "") for e in ev if e["event"] == "warning"]
if not any("logarithmic" in w and "--input-colorspace" in w for w in warn):
    fail(f"a log DPX under auto should warn and ask for a name: {warn}")

# 3b. The LogC plates as a 10-bit ProRes 4444 video (made by ffmpeg): decoded at 16 bits
#     through the ffmpeg binary, not OpenCV's 8, so it keys like the 10-bit DPX.
vid = os.path.join(work, "video", "clip")
shutil.copytree(os.path.join(logc, "AlphaHint"), os.path.join(vid, "AlphaHint"))
for i, f in enumerate(sorted(os.listdir(os.path.join(logc, "Input")))):
    px = read(os.path.join(logc, "Input", f))[..., :3]
    cv2.imwrite(os.path.join(work, f"v{i + 1}.png"), np.round(np.clip(px, 0, 1) * 65535).astype(np.uint16))
subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-framerate", "24", "-i",
                os.path.join(work, "v%d.png"), "-c:v", "prores_ks", "-profile:v", "4444",
                "-pix_fmt", "yuv444p10le", os.path.join(vid, "Input.mov")], check=True)
ev = key(vid, f"{work}/out_video", "--input-colorspace", "arri-logc3-ei800-awg", "--video-out", "none")
started = [e["message"] for e in ev if e["event"] == "clip_started"]
if not started or "video decoded at 16 bits" not in started[0]:
    fail(f"a LogC video should be decoded at 16 bits: {started}")
vm = read(os.path.join(f"{work}/out_video", "clip", "Matte", sorted(os.listdir(f"{work}/out_video/clip/Matte"))[0]))
err = max_err(vm, c["Matte"])
print(f"10-bit ProRes LogC3 vs float LogC3 EXR: matte max abs error {err:.4f} (bound 0.05)")
if err > 0.05:
    fail(f"10-bit ProRes matte differs from the float LogC EXR's by {err}")

# 4. ACES2065-1 (AP0) EXRs with chromaticities set: detected, and the Processed EXR comes
#    back AP0 with matching chromaticities.
ap0 = os.path.join(work, "ap0", "clip")
reencode_clip(lin, ap0, "ap0")
for f in os.listdir(os.path.join(ap0, "Input")):
    p = os.path.join(ap0, "Input", f)
    tmp = os.path.join(work, "ap0_tmp.exr")  # oiiotool never writes the file it reads
    subprocess.run(["oiiotool", p, "--attrib:type=float[8]", "chromaticities",
                    "0.7347,0.2653,0,1,0.0001,-0.077,0.32168,0.33767", "-o", tmp], check=True)
    os.replace(tmp, p)
ev = key(ap0, f"{work}/out_ap0", "--input-colorspace", "auto")
started = [e["message"] for e in ev if e["event"] == "clip_started"]
if not started or "aces2065-1 (auto: EXR chromaticities are ACES AP0)" not in started[0]:
    fail(f"AP0 EXR not detected as aces2065-1: {started}")
e = outputs(f"{work}/out_ap0")
err = max_err(e["Matte"], a["Matte"])
print(f"AP0 EXR vs linear: matte max abs error {err:.2e}")
if err > 2e-3:
    fail(f"AP0 matte differs from the linear clip's by {err}")
proc = os.path.join(f"{work}/out_ap0", "clip", "Processed", sorted(os.listdir(f"{work}/out_ap0/clip/Processed"))[0])
xy = chromaticities(proc)
if not xy or abs(xy[4] - 0.0001) > 1e-5 or abs(xy[5] + 0.077) > 1e-5:
    fail(f"Processed of an AP0 plate should carry AP0 chromaticities, got {xy}")
want = ocio_encode("ap0", a["Processed"][..., 2::-1].copy())  # linear Rec.709 -> AP0 (RGB)
err = max_err(e["Processed"][..., 2::-1], want)
print(f"AP0 Processed vs OCIO(AP0 of the linear Processed): max abs error {err:.2e}")
if err > 5e-3:
    fail(f"AP0 Processed differs from the linear key's, converted by OCIO, by {err}")

# 5. --output-colorspace and --fg-colorspace: values and chromaticities.
key(lin, f"{work}/out_cg", "--linear", "--outputs", "fg,processed", "--frames", "1")
key(lin, f"{work}/out_cg2", "--input-colorspace", "linear-rec709", "--output-colorspace", "acescg",
    "--fg-colorspace", "acescg", "--outputs", "fg,processed", "--frames", "1")
d2 = f"{work}/out_cg2/clip"
for k in ("FG", "Processed"):
    xy = chromaticities(os.path.join(d2, k, sorted(os.listdir(os.path.join(d2, k)))[0]))
    if not xy or abs(xy[0] - 0.713) > 1e-4:
        fail(f"{k} in acescg should carry AP1 chromaticities, got {xy}")

# 6. Names: unknown (exit 2, listing the built-in names), $OCIO broken (built-in names still
#    work; another name is exit 2 naming the file), a config without the name, both spellings.
p = run(["inference", lin, "--input-colorspace", "logc3", "--output-root", f"{work}/x"] + model, expect=2)
if "arri-logc3-ei800-awg" not in p.stderr:
    fail(f"unknown name: valid names not listed: {p.stderr}")
broken = os.path.join(work, "broken.ocio")
open(broken, "w").write("ocio_profile_version: 2\ncolorspaces: [ {\n")
run(["inference", lin, "--input-colorspace", "acescg", "--frames", "1", "--output-root", f"{work}/y"] + model,
    env={"OCIO": broken})
p = run(["inference", lin, "--input-colorspace", "ACES - ACEScg", "--output-root", f"{work}/z"] + model,
        env={"OCIO": broken}, expect=2)
if broken not in p.stderr:
    fail(f"broken $OCIO not named: {p.stderr}")
good = os.path.join(work, "good.ocio")
open(good, "w").write("""ocio_profile_version: 2
roles:
  default: ACES2065-1
  scene_linear: ACEScg
  aces_interchange: ACES2065-1
file_rules:
  - !<Rule> {name: Default, colorspace: default}
displays:
  sRGB:
    - !<View> {name: Raw, colorspace: ACES2065-1}
colorspaces:
  - !<ColorSpace>
    name: ACES2065-1
  - !<ColorSpace>
    name: ACEScg
    to_scene_reference: !<BuiltinTransform> {style: ACEScg_to_ACES2065-1}
""")
p = run(["inference", lin, "--input-colorspace", "Nope", "--ocio-config", good, "--output-root", f"{work}/w"] + model,
        expect=2)
if "not in OCIO config" not in p.stderr or "ACEScg" not in p.stderr:
    fail(f"config without the name: {p.stderr}")
run(["inference", lin, "--linear", "--input-colorspace", "acescg", "--output-root", f"{work}/v"] + model, expect=2)
p = run(["colorspaces", "--ocio-config", good])
if "arri-logc4-awg4" not in p.stdout or "ACEScg" not in p.stdout:
    fail(f"colorspaces does not list built-in and config names: {p.stdout}")
run(["colorspaces"], env={"OCIO": broken}, expect=2)
# a config's colour space and --comp-view through the config's display/view
key(lin, f"{work}/out_cfg", "--input-colorspace", "ACEScg", "--ocio-config", good, "--comp-view", "sRGB/Raw",
    "--frames", "1")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("cli colour: ok")
