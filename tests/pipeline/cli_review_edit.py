#!/usr/bin/env python3
"""`corridorkey-engine review`, second phase (docs/review.md): compare, tweak and key, through
the real binary and Debian's chromium (Playwright).

  cli_review_edit.py CLI WORKDIR     (env CK_MAKE_CLIP: the synthetic clip generator)

Checks, each failing when the behaviour it names breaks:
  - the wipe shows A left of the line and B right of it, each equal to its root's Matte
    within 1 LSB; |A - B| x 8 equals the files' difference; the MSE shown equals the one
    computed here from the two Matte files;
  - a despill change shows the Comp that `inference --despill 8` writes for that frame
    (within 1 LSB), keys the frame once and then only post-processes, and writes no file;
  - "Save settings" writes a job file that `job validate` accepts, with the settings;
    "Write" rewrites Processed and Comp as `inference --despill 8` writes them, and leaves
    Matte and FG alone;
  - a key started from the page reaches 100% with its outputs, its failed frame listed with
    the message; a key cancelled mid-clip (a generated clip long enough) stops, leaves no
    partial or temporary file, and its run.json says interrupted.
"""
import filecmp
import glob
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from review_support import Browser, Review, check, levels, make_clip, max_diff, np, read  # noqa: E402
import cv2  # noqa: E402  (review_support set OPENCV_IO_ENABLE_OPENEXR first)

cli, work = sys.argv[1], sys.argv[2]
ENGINE = ["--device", "cpu", "--tune", "off"]
t_start = time.time()

shutil.rmtree(work, ignore_errors=True)
shots, draft, despill8 = (os.path.join(work, d) for d in ("shots", "draft", "despill8"))
sh010, sh050, sh060 = (os.path.join(shots, n) for n in ("sh010", "sh050", "sh060"))
make_clip(sh010, "--frames", "3", "--size", "160x90", "--plate", "png", "--hint", "png", "--prefix", "f",
          "--digits", "1", "--soft-edge", "12")
make_clip(sh050, "--frames", "4", "--size", "160x90", "--plate", "png", "--hint", "png", "--prefix", "k",
          "--digits", "1")
with open(os.path.join(sh050, "Input", "k3.png"), "wb") as f:
    f.write(b"\x89PNG\r\n\x1a\n not an image")  # this frame fails; the others are keyed
make_clip(sh060, "--frames", "60", "--size", "320x180", "--plate", "png", "--hint", "png", "--prefix", "c")
subprocess.run([cli, "inference", sh010, *ENGINE, "--quiet"], check=True)
subprocess.run([cli, "inference", sh010, *ENGINE, "--quiet", "--profile", "draft", "--output-root", draft], check=True)
subprocess.run([cli, "inference", sh010, *ENGINE, "--quiet", "--despill", "8", "--output-root", despill8], check=True)
out = os.path.join(sh010, "Output")
OVER = "['done', 'cancelled', 'failed'].includes(j.state)"
stamps = lambda d: {p: os.stat(p).st_mtime_ns for p in glob.glob(os.path.join(d, "**", "*.*"), recursive=True)}  # noqa: E731

rv = Review(cli, shots, *ENGINE, "--compare-root", draft)
with Browser() as b:
    page = b.page
    b.open(rv.url)
    b.open_clip("sh010")

    # ---- compare: wipe, |A - B| x 8, MSE ---------------------------------------------------
    page.keyboard.press("3")
    page.click("#zoom-one")
    b.scrub(1)
    b.wait_shown(1, "matte")
    page.check("#wipe-on")  # the line at 50%: A on [0, 80), B on [80, 160)
    b.wait_shown(1, "matte", "s.wipe === 0.5")
    ma, mb = read(os.path.join(out, "Matte", "f2.exr")), read(os.path.join(draft, "sh010", "Matte", "f2.exr"))
    got = b.canvas(160, 90)[:, :, 0]
    check(max_diff(got[:, :80], levels(ma)[:, :80]) <= 1, "wipe: the left side is not A's matte")
    check(max_diff(got[:, 80:], levels(mb)[:, 80:]) <= 1, "wipe: the right side is not B's matte")
    check(max_diff(levels(ma)[:, 80:], levels(mb)[:, 80:]) > 1, "the two roots' mattes do not differ: a weak test")
    mse = float(np.mean((ma.astype(np.float64) - mb.astype(np.float64)) ** 2))
    page.wait_for_function("() => document.getElementById('mse').textContent.includes('frame 2:')")
    shown = float(page.locator("#mse").inner_text().split("frame 2:")[1].split()[0])
    check(abs(shown - mse) <= 1e-4 * mse, f"MSE shown {shown} != {mse}")
    page.uncheck("#wipe-on")
    page.click("#diff")
    b.wait_shown(1, "diff")
    check(max_diff(b.canvas(160, 90)[:, :, 0], levels(8 * np.abs(ma - mb))) <= 1, "|A - B| x 8 view")

    # ---- tweak: despill re-posted on the loaded model -----------------------------------
    before = stamps(shots)
    page.keyboard.press("5")
    b.wait_shown(1, "comp")
    page.locator("#despill").evaluate("e => { e.value = 8; e.dispatchEvent(new Event('input')); }")
    b.wait_shown(1, "comp", "s.tweak && window.ckReview.tweak && window.ckReview.tweak.despill === 8")
    first = page.evaluate("window.ckReview.tweak")
    want = read(os.path.join(despill8, "sh010", "Comp", "f2.png"))
    got = b.canvas(160, 90)
    check(max_diff(got, levels(want)) <= 1, "the tweaked comp != inference --despill 8's Comp")
    check(max_diff(got, levels(read(os.path.join(out, "Comp", "f2.png")))) > 1, "despill 8 changed nothing: a weak test")
    check(first["timings"]["keyed"], f"the first tweak did not key the frame: {first}")
    page.locator("#despill").evaluate("e => { e.value = 7; e.dispatchEvent(new Event('input')); }")
    b.wait_shown(1, "comp", "s.tweak && window.ckReview.tweak.despill === 7")
    second = page.evaluate("window.ckReview.tweak")
    check(not second["timings"]["keyed"], f"a second tweak ran the model again: {second}")
    print(f"tweak: first {first['ms']:.0f} ms (keyed), then {second['ms']:.0f} ms", flush=True)
    check(stamps(shots) == before, "a tweak wrote a file")

    # ---- save settings, then write ---------------------------------------------------------
    page.locator("#despill").evaluate("e => { e.value = 8; e.dispatchEvent(new Event('input')); }")
    b.wait_shown(1, "comp", "s.tweak && window.ckReview.tweak.despill === 8")
    page.click("#save-settings")
    page.wait_for_function("() => window.ckReview.saved")
    saved = page.evaluate("window.ckReview.saved")
    check(saved["path"] == os.path.join(out, "review-settings.yaml"), f"settings at {saved}")
    text = open(saved["path"]).read()
    check("despill: 8\n" in text and "despeckle: true\n" in text and "job run" in page.locator("#settings-out").inner_text(),
          f"settings file: {text}")
    r = subprocess.run([cli, "job", "validate", saved["path"]], capture_output=True, text=True)
    check(r.returncode == 0, f"job validate: {r.returncode} {r.stdout} {r.stderr}")
    check({p: t for p, t in stamps(shots).items() if not p.endswith("review-settings.yaml")} == before,
          "saving the settings changed another file")
    mattes = stamps(os.path.join(out, "Matte"))
    page.click("#write")
    page.wait_for_function(f"() => (window.ckReview.jobs || []).some(j => j.kind === 'write' && {OVER})", timeout=300000)
    job = [j for j in page.evaluate("window.ckReview.jobs") if j["kind"] == "write"][0]
    check(job["state"] == "done" and job["frames_done"] == 3 and not job["failures"], f"Write: {job}")
    for i in (1, 2, 3):
        for d, ext in (("Comp", "png"), ("Processed", "exr")):
            check(filecmp.cmp(os.path.join(out, d, f"f{i}.{ext}"), os.path.join(despill8, "sh010", d, f"f{i}.{ext}"),
                              shallow=False), f"Write: {d}/f{i}.{ext} != inference --despill 8's")
    check(stamps(os.path.join(out, "Matte")) == mattes, "Write rewrote the mattes")

    # ---- key a clip from the page: progress to 100%, its failure listed --------------------
    b.open_clip("sh050")
    page.select_option("#screen", "auto")
    page.click("#key-start")
    page.wait_for_function(f"() => (window.ckReview.jobs || []).some(j => j.clip === 'sh050' && {OVER})",
                           timeout=300000)
    job = [j for j in page.evaluate("window.ckReview.jobs") if j["clip"] == "sh050"][0]
    check(job["state"] == "done", f"key: {job}")
    row = page.locator(f".job[data-job='{job['id']}']").inner_text()
    check(job["frames_done"] == job["frames_total"] == 4 and "4 / 4 frames, 100%" in row, f"key progress: {job} {row}")
    check(len(job["failures"]) == 1 and job["failures"][0]["frame"] == "k3" and "k3.png" in row, f"failures: {row}")
    for i in (1, 2, 4):
        for d, ext in (("Matte", "exr"), ("FG", "exr"), ("Processed", "exr"), ("Comp", "png")):
            check(os.path.isfile(os.path.join(sh050, "Output", d, f"k{i}.{ext}")), f"key: no {d}/k{i}.{ext}")
    page.wait_for_function("() => [...document.querySelectorAll('#clips li')].some("
                           "li => li.textContent.includes('sh050') && li.textContent.includes('partial'))")

    # ---- cancel mid-clip: nothing partial left ------------------------------------------
    b.open_clip("sh060")
    page.click("#key-start")
    page.wait_for_function("() => (window.ckReview.jobs || []).some(j => j.clip === 'sh060' && j.frames_done >= 2)",
                           timeout=300000)
    page.locator(".job[data-state='running'] button.cancel").click()
    page.wait_for_function(f"() => (window.ckReview.jobs || []).some(j => j.clip === 'sh060' && {OVER})",
                           timeout=300000)
    job = [j for j in page.evaluate("window.ckReview.jobs") if j["clip"] == "sh060"][0]
    check(job["state"] == "cancelled", f"cancel: the job {job['state']}, {job['frames_done']} of {job['frames_total']}")
    written = sorted(glob.glob(os.path.join(sh060, "Output", "Matte", "*.exr")))
    check(2 <= len(written) < 60, f"cancel: {len(written)} mattes written, job {job}")
    check(not glob.glob(os.path.join(sh060, "**", "*ck-tmp*"), recursive=True), "cancel left a temporary file")
    for p in written:  # every file there is whole
        check(read(p).shape[:2] == (180, 320), f"{p} is not whole")
    run = json.load(open(os.path.join(sh060, "Output", "run.json")))
    check(run["interrupted"] and run["frames_done"] == len(written), f"run.json after cancel: {run['frames_done']}")
    page.screenshot(path=os.path.join(work, "review_edit.png"))

rv.stop()

# ---- a blue plate with checkpoint_blue: the tweak is inference's Comp -------------------------
# review's engine holds the blue-screen model, so a tweak of a blue clip shows what
# `inference --checkpoint-blue` wrote (through the same display transform, within 1 LSB), not
# the swapped green model's. The bundled model stands in for the blue one (see cli_serve.py).
bundled = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "checkpoints",
                       "greenformer_small_synthetic384.ts")
blue_root = os.path.join(work, "blue_shots")
blue = os.path.join(blue_root, "shb")
make_clip(blue, "--frames", "1", "--size", "160x90", "--plate", "png", "--hint", "png", "--soft-edge", "12",
          "--screen", "blue")
subprocess.run([cli, "inference", blue, *ENGINE, "--quiet", "--checkpoint-blue", bundled, "--screen", "blue"],
               check=True)
subprocess.run([cli, "inference", blue, *ENGINE, "--quiet", "--screen", "blue", "--output-root",
                os.path.join(work, "blue_swapped")], check=True)
rv = Review(cli, blue_root, *ENGINE, "--checkpoint-blue", bundled)
try:
    bid = [c["id"] for c in rv.get_json("/api/clips")["clips"] if c["name"] == "shb"][0]
    s, _, png = rv.post_json("/api/tweak", {"clip": bid, "frame": 0, "view": "comp", "despill": 5})
    check(s == 200, f"blue tweak: {s} {png[:200]!r}")
    got = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_UNCHANGED)[:, :, :3][:, :, ::-1].astype(np.int32)
    check(max_diff(got, levels(read(os.path.join(blue, "Output", "Comp", "0001.png")))) <= 1,
          "the blue clip's tweak != inference --checkpoint-blue's Comp")
    check(max_diff(got, levels(read(os.path.join(work, "blue_swapped", "shb", "Comp", "0001.png")))) > 1,
          "the blue tweak equals the swapped green model's Comp: the blue model did not key it")
finally:
    rv.stop()
print(f"cli review edit: ok ({time.time() - t_start:.0f} s)")
