#!/usr/bin/env python3
"""`serve`'s frame.key with garbage and holdout mattes (issue 52), through the real binary.

  cli_serve_mattes.py CLI WORKDIR CHECKPOINT     (the tiny random model: the exact 0 / 1
                                                  regions do not depend on the weights)

Checks, each failing when the behaviour it names breaks:
  - a PNG garbage matte and an EXR holdout matte give Matte exactly 0 under the garbage and
    exactly 1 under the holdout, Processed's alpha the same (and its colour 0 under the
    garbage), the same bytes as `inference` on a clip with GarbageMatte/ and HoldoutMatte/;
  - a matte from shared memory keys as the same matte in a file does;
  - another matte is another frame: keyed anew (not the cached frame of the request without
    it), and frame.repost of each frame_id keeps its own mattes;
  - a matte of another size is an error naming the file (or the block); an output onto a
    matte input and an unknown parameter are refused, naming what is expected;
  - the layered output (docs/clips.md, "The layered output"): one EXR whose channels are
    exactly R, G, B, A, FG.R, FG.G, FG.B, matte.A (OpenImageIO, `oiiotool --info -v`), each
    equal bit for bit (half) to the separate processed, fg and matte files of the same
    request, with the request's exr_compression; a repost writes it too; as shared memory, as
    a .png, onto the plate or into another output's file it is refused.
"""
import os
import re
import shutil
import subprocess
import sys
from multiprocessing import shared_memory

os.environ.setdefault("OPENCV_IO_ENABLE_OPENEXR", "1")  # before cv2 is imported
import cv2  # noqa: E402
import numpy as np  # noqa: E402
import OpenImageIO as oiio  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
from corridorkey_client import Client, RpcError, shm_image  # noqa: E402

cli, work, ckpt = sys.argv[1], sys.argv[2], sys.argv[3]
# No timed plan: serve and `inference` run in separate processes and must choose alike.
MODEL = ["--device", "cpu", "--tune", "off", "--checkpoint", ckpt, "--img-size", "128"]
W, H = 128, 96
venv_oiiotool = os.path.join(os.path.dirname(sys.executable), "oiiotool")
oiiotool = venv_oiiotool if os.path.exists(venv_oiiotool) else shutil.which("oiiotool")
LAYERED = ["R", "G", "B", "A", "FG.R", "FG.G", "FG.B", "matte.A"]


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def expect_error(fn, code, text):
    try:
        fn()
    except RpcError as e:
        check(e.code == code, f"expected error code {code}, got {e.code}: {e.message}")
        check(re.search(text, e.message), f"error message {e.message!r} lacks {text!r}")
        return e
    fail(f"expected error {code}, the call succeeded")


def read(path):
    im = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    check(im is not None, f"cannot read {path}")
    return im


def read_half(path):
    """(channel names in file order, [H,W,C] float16) as OpenImageIO reads the EXR."""
    inp = oiio.ImageInput.open(path)
    check(inp is not None, f"OpenImageIO cannot open {path}: {oiio.geterror()}")
    spec = inp.spec()
    px = inp.read_image(0, 0, 0, spec.nchannels, "half")
    inp.close()
    check(px is not None and px.dtype == np.float16, f"{path}: not read as half")
    return list(spec.channelnames), px.reshape(spec.height, spec.width, spec.nchannels), spec


def same_bytes(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


subprocess.run(["rm", "-rf", work], check=True)
clip = os.path.join(work, "clip")
for d in ("Input", "GarbageMatte", "HoldoutMatte"):
    os.makedirs(os.path.join(clip, d))
out = os.path.join(work, "out")
os.makedirs(out)

# A green backing with a grey subject; noise so the model sees something other than flat.
rng = np.random.default_rng(52)
plate = np.empty((H, W, 3), np.uint8)
plate[:] = (30, 180, 40)  # BGR: green
plate[24:72, 40:88] = (128, 128, 128)
plate = np.clip(plate.astype(np.int16) + rng.integers(-6, 7, plate.shape), 0, 255).astype(np.uint8)
plate_png = os.path.join(clip, "Input", "0001.png")
cv2.imwrite(plate_png, plate)
# Garbage over the left columns and across the subject; holdout over backing at the right,
# where the raw matte is near 0, so both bounds move the matte.
garbage = np.zeros((H, W), np.uint8)
garbage[:, :48] = 255
garbage_png = os.path.join(clip, "GarbageMatte", "0001.png")
cv2.imwrite(garbage_png, garbage)
holdout = np.zeros((H, W), np.float32)
holdout[8:40, 96:124] = 1.0
holdout_exr = os.path.join(clip, "HoldoutMatte", "0001.exr")
cv2.imwrite(holdout_exr, holdout)
g1, h1 = garbage == 255, holdout == 1.0
other_png = os.path.join(work, "garbage_right.png")  # another garbage matte: the right columns
other = np.zeros((H, W), np.uint8)
other[:, 80:] = 255
cv2.imwrite(other_png, other)
small_png = os.path.join(work, "garbage_small.png")
cv2.imwrite(small_png, garbage[: H // 2, : W // 2])

subprocess.run([cli, "inference", clip, *MODEL, "--quiet"], check=True)


def outputs(tag):
    return {k: os.path.join(out, f"{tag}_{k}.exr") for k in ("matte", "fg", "processed")}


with Client.spawn(cli, MODEL) as ck:
    # ---- 1. file mattes: the exact bounds, the same bytes as inference ----------------------
    plain, keyed = outputs("plain"), outputs("mattes")
    r0 = ck.key(plate_png, outputs=plain)
    r1 = ck.key(plate_png, outputs=keyed, garbage=garbage_png, holdout=holdout_exr)
    m0, m1 = read(plain["matte"]), read(keyed["matte"])
    # Without them the model gives neither bound there: the mattes are what moved the matte.
    check(m0[g1].max() > 0 and m0[h1].min() < 1, "the raw matte is already 0 / 1 in the regions: no proof")
    check(np.all(m1[g1] == 0), f"matte under the garbage: max {m1[g1].max()}")
    check(np.all(m1[h1] == 1), f"matte under the holdout: min {m1[h1].min()}")
    p1 = read(keyed["processed"])  # BGRA, premultiplied
    check(np.all(p1[g1] == 0), "processed is not transparent black under the garbage")
    check(np.all(p1[..., 3][h1] == 1), f"processed alpha under the holdout: min {p1[..., 3][h1].min()}")
    for k, d in (("matte", "Matte"), ("fg", "FG"), ("processed", "Processed")):
        check(same_bytes(keyed[k], os.path.join(clip, "Output", d, "0001.exr")),
              f"frame.key {k} with mattes differs from inference's with GarbageMatte/ and HoldoutMatte/")

    # ---- 2. a matte from shared memory is the file's matte ------------------------------------
    sm = shared_memory.SharedMemory(create=True, size=W * H)
    try:
        np.ndarray((H, W), np.uint8, sm.buf)[:] = garbage
        via_shm = outputs("shm")
        ck.key(plate_png, outputs=via_shm, garbage=shm_image(sm.name, W, H, 1, "uint8"), holdout=holdout_exr)
        check(np.array_equal(read(via_shm["matte"]), m1), "a shared-memory garbage matte != the PNG's")
        e = expect_error(lambda: ck.key(plate_png, garbage=shm_image(sm.name, W // 2, H, 1, "uint8")), -32003,
                         re.escape("shm:/" + sm.name.lstrip("/")))
        check("64x96" in e.message, f"wrong-size block: {e.message}")
    finally:
        sm.close()
        sm.unlink()

    # ---- 3. another matte is another frame; reposts keep each frame's own ---------------------
    moved = outputs("moved")
    r2 = ck.key(plate_png, outputs=moved, garbage=other_png)
    check(len({r0["frame_id"], r1["frame_id"], r2["frame_id"]}) == 3, f"frame ids {r0}, {r1}, {r2}")
    m2 = read(moved["matte"])
    check(np.all(m2[other == 255] == 0), "the second garbage matte was not applied")
    check(m2[g1].max() > 0, "the first garbage matte still cuts a request that gives another: a cached frame reused")
    for rid, ref, tag in ((r0, m0, "plain"), (r1, m1, "mattes"), (r2, m2, "moved")):
        rp = {"matte": os.path.join(out, f"repost_{tag}_matte.exr"),
              "processed": os.path.join(out, f"repost_{tag}_processed.exr")}
        ck.repost(rid["frame_id"], outputs=rp, despeckle=False, despill=10)
        check(np.array_equal(read(rp["matte"]), ref), f"repost {tag}: matte differs from its frame.key's")
        alpha = read(rp["processed"])[..., 3]
        if tag == "mattes":
            check(np.all(alpha[g1] == 0) and np.all(alpha[h1] == 1), "a repost lost the frame's mattes")
        if tag == "moved":
            check(np.all(alpha[other == 255] == 0) and alpha[g1].max() > 0, "a repost took another frame's matte")
        if tag == "plain":
            check(alpha[g1].max() > 0, "a repost of the frame keyed without mattes has them")

    # ---- 4. refused: another size, an output onto a matte, an unknown parameter ---------------
    e = expect_error(lambda: ck.key(plate_png, garbage=small_png), -32003, re.escape(small_png))
    check("64x48" in e.message and "128x96" in e.message, f"wrong-size matte: {e.message}")
    expect_error(lambda: ck.key(plate_png, holdout=os.path.join(work, "missing.exr")), -32003, "missing.exr")
    hold_out = os.path.join(out, "hold.exr")
    cv2.imwrite(hold_out, holdout)
    expect_error(lambda: ck.key(plate_png, holdout=hold_out, outputs={"matte": hold_out}), -32602,
                 "is an input of this request")
    check(np.array_equal(read(hold_out), holdout), "a refused output touched the holdout matte")
    expect_error(lambda: ck.key(plate_png, garbage_matte=garbage_png), -32602,
                 r"unknown parameter 'garbage_matte' \(expected plate, hint, garbage, holdout, outputs")
    expect_error(lambda: ck.key(plate_png, garbage=7), -32602, "garbage must be a path")

    # ---- 5. the layered EXR: the separate files' bits in one file ---------------------------
    lay = {**outputs("layered"), "layered": os.path.join(out, "layered.exr")}
    r5 = ck.key(plate_png, outputs=lay, garbage=garbage_png, holdout=holdout_exr, exr_compression="zip")
    check(r5["outputs"] == lay, f"frame.key's result lists the outputs {r5['outputs']}, expected {lay}")
    names, px, spec = read_half(lay["layered"])
    check(names == LAYERED, f"layered channels {names}, expected {LAYERED}")
    check(spec.get_string_attribute("compression") == "zip",
          f"layered compression {spec.get_string_attribute('compression')!r}, asked zip")
    separate = {k: read_half(lay[k]) for k in ("processed", "fg", "matte")}
    for i, (lname, kind, cname) in enumerate(
            [("R", "processed", "R"), ("G", "processed", "G"), ("B", "processed", "B"), ("A", "processed", "A"),
             ("FG.R", "fg", "R"), ("FG.G", "fg", "G"), ("FG.B", "fg", "B"), ("matte.A", "matte", "Y")]):
        snames, spx, _ = separate[kind]
        check(cname in snames, f"{kind} has channels {snames}, no {cname}")
        a, b = px[..., i].view(np.uint16), spx[..., snames.index(cname)].view(np.uint16)
        check(a.tobytes() == b.tobytes(),
              f"layered {lname} differs from {kind} {cname} ({np.count_nonzero(a != b)} samples)")
    check(np.all(px[..., LAYERED.index("matte.A")][g1] == 0), "layered matte.A is not 0 under the garbage")
    info = subprocess.run([oiiotool, "--info", "-v", lay["layered"]], capture_output=True, text=True).stdout
    check("R, G, B, A, FG.R, FG.G, FG.B, matte.A" in info, f"oiiotool --info -v does not list the layers:\n{info}")
    # frame.repost writes it too, with the frame's settings: the same samples.
    lay2 = os.path.join(out, "layered_repost.exr")
    rp = ck.repost(r5["frame_id"], outputs={"layered": lay2})
    check(rp["outputs"] == {"layered": lay2}, f"frame.repost's result lists the outputs {rp['outputs']}")
    names2, px2, spec2 = read_half(lay2)
    check(names2 == LAYERED and px2.view(np.uint16).tobytes() == px.view(np.uint16).tobytes(),
          "frame.repost's layered EXR differs from frame.key's")
    check(spec2.get_string_attribute("compression") == "zip", "frame.repost did not keep the frame's exr_compression")
    # Refused before the model runs: shared memory, another format, onto an input, one file twice.
    e = expect_error(lambda: ck.key(plate_png, outputs={"layered": shm_image("ck_layered", W, H, 4, "float32")}),
                     -32602, r"layered is written only as a file \(a \.exr path\)")
    check("shared memory" in e.message, f"the shared-memory refusal does not say so: {e.message}")
    expect_error(lambda: ck.repost(r5["frame_id"], outputs={"layered": shm_image("ck_layered", W, H, 4)}),
                 -32602, "layered is written only as a file")
    expect_error(lambda: ck.key(plate_png, outputs={"layered": os.path.join(out, "layered.png")}), -32002,
                 r"layered is written as \.exr")
    plate_exr = os.path.join(work, "plate.exr")  # the plate as an EXR: a path layered could name
    cv2.imwrite(plate_exr, plate.astype(np.float32) / 255)
    before = open(plate_exr, "rb").read()
    expect_error(lambda: ck.key(plate_exr, outputs={"layered": plate_exr}), -32602,
                 "outputs: layered " + re.escape(plate_exr) + " is an input of this request")
    check(open(plate_exr, "rb").read() == before, "a refused layered output touched the plate")
    expect_error(lambda: ck.key(plate_exr, outputs={"processed": lay["processed"], "layered": lay["processed"]}),
                 -32602, "outputs (processed and layered|layered and processed) name the same file")
    expect_error(lambda: ck.key(plate_png, outputs={"layers": lay["layered"]}), -32602,
                 r"unknown output 'layers' \(expected matte, fg, processed, comp, hint or layered\)")

print("serve mattes: ok")
