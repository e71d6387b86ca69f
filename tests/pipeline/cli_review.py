#!/usr/bin/env python3
"""`corridorkey-engine review`, first phase (docs/review.md): run.json, the server's security,
the viewer and the display, through the real binary and Debian's chromium (Playwright).

  cli_review.py CLI WORKDIR     (env CK_MAKE_CLIP: the synthetic clip generator)

Checks, each failing when the behaviour it names breaks:
  - inference writes run.json beside a clip's outputs (profile, precision, plan, per-frame
    times, failures, version); --skip-existing ignores it, even a corrupt one;
  - one URL with a 64-hex token; without the token or with a wrong one: 403 and no content;
    the token becomes an HttpOnly, SameSite=Strict cookie and leaves the URL;
  - a foreign Host header, POSTs without this Origin, a body over the limit are refused;
  - traversal: '..', encoded forms, absolute paths, a symlink out, a frame that is a symlink
    out: refused, no content; a link that stays inside is served;
  - the page lists the clips; frame 5 of the matte view equals the Matte file's values on
    the canvas (1:1) within 1 LSB; the probe shows the float alpha and the plate's values;
    keys step frames and switch views; the plate, FG over black and Processed over black
    equal their files composited in linear light; a linear EXR plate goes through the
    display transform, with exposure;
  - playback over a slow connection keeps the clip's rate by dropping frames;
  - SIGTERM ends the server, exit 130.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from review_support import (Browser, Review, check, levels, make_clip, max_diff, np, read,  # noqa: E402
                            srgb_decode, srgb_encode)

cli, work = sys.argv[1], sys.argv[2]
ENGINE = ["--device", "cpu", "--tune", "off"]
t_start = time.time()

shutil.rmtree(work, ignore_errors=True)
shots = os.path.join(work, "shots")
outside = os.path.join(work, "outside")
os.makedirs(outside)
sh010, sh020, sh030, sh040 = (os.path.join(shots, n) for n in ("sh010", "sh020", "sh030", "sh040"))
make_clip(sh010, "--frames", "8", "--size", "160x90", "--plate", "png", "--hint", "png", "--prefix", "f",
          "--digits", "2", "--soft-edge", "6")
make_clip(sh020, "--frames", "2", "--size", "160x90", "--plate", "exr", "--hint", "none", "--prefix", "e",
          "--digits", "1")
make_clip(sh030, "--frames", "1", "--size", "64x36", "--plate", "png", "--hint", "png", "--prefix", "s")
make_clip(sh040, "--frames", "48", "--size", "64x36", "--plate", "png", "--hint", "png", "--prefix", "p",
          "--digits", "2")
# sh030's only plate leads out of the roots; a note and an image under the root point out and in.
secret = os.path.join(outside, "secret.txt")
with open(secret, "w") as f:
    f.write("SECRET-CONTENT-42\n")
shutil.copy(os.path.join(sh030, "Input", "s0001.png"), os.path.join(outside, "plate.png"))
os.remove(os.path.join(sh030, "Input", "s0001.png"))
os.symlink(os.path.join(outside, "plate.png"), os.path.join(sh030, "Input", "s0001.png"))
os.makedirs(os.path.join(shots, "_notes"))
os.symlink(secret, os.path.join(shots, "_notes", "leak.txt"))
os.symlink(os.path.join(sh010, "Input", "f01.png"), os.path.join(shots, "_notes", "alias.png"))
big = os.path.join(shots, "_notes", "big.bin")  # /raw/ streams it
with open(big, "wb") as f:
    f.write(os.urandom(5 << 20))

# ---- 1. run.json ------------------------------------------------------------------------
subprocess.run([cli, "inference", sh010, *ENGINE, "--quiet"], check=True)
subprocess.run([cli, "inference", sh020, *ENGINE, "--quiet", "--input-colorspace", "linear-rec709"], check=True)
version = subprocess.run([cli, "--version"], capture_output=True, text=True, check=True).stdout.split()[-1]
run_path = os.path.join(sh010, "Output", "run.json")
run = json.load(open(run_path))
check(run["engine_version"] == version and run["profile"] == "optimized", f"run.json: {run}")
check(run["precision"] in ("float32", "bfloat16") and run["plan"]["origin"] == "off", f"run.json plan: {run['plan']}")
check([t["frame"] for t in run["frame_times"]] == [f"f{i:02d}" for i in range(1, 9)], "run.json frame_times")
check(all(t["infer_ms"] > 0 for t in run["frame_times"]) and run["failures"] == [], "run.json times / failures")
check(run["frames_done"] == 8 and run["hints"] == "files" and run["screen"] == "green", f"run.json: {run}")
run20 = json.load(open(os.path.join(sh020, "Output", "run.json")))
check(run20["hints"] == "generated" and run20["input_colorspace"] == "linear-rec709", f"sh020 run.json {run20}")
check(not glob.glob(os.path.join(shots, "**", "*ck-tmp*"), recursive=True), "a temporary file was left")
# --skip-existing compares frame outputs only: a run.json, even garbage, changes nothing.
with open(run_path, "w") as f:
    f.write("not json {")
r = subprocess.run([cli, "inference", sh010, *ENGINE, "--skip-existing", "--json"], capture_output=True,
                   text=True, check=True)
events = [json.loads(line) for line in r.stdout.splitlines()]
check(sum(e["event"] == "frame_skipped" for e in events) == 8 and not any(e["event"] == "frame_done" for e in events),
      "--skip-existing did not skip every frame beside a corrupt run.json")
check(open(run_path).read() == "not json {", "a run that keyed nothing replaced run.json")
os.remove(os.path.join(sh010, "Output", "Matte", "f03.exr"))
subprocess.run([cli, "inference", sh010, *ENGINE, "--skip-existing", "--quiet"], check=True)
run = json.load(open(run_path))
check([t["frame"] for t in run["frame_times"]] == ["f03"], f"rerun's run.json: {run['frame_times']}")

# ---- 2. the server: token, Host, Origin, sizes, traversal ---------------------------------
for listen, why in (("unix:" + os.path.join(work, "r.sock"), "Unix socket"), ("tcp:0.0.0.0:0", "loopback only"),
                   ("tcp:192.168.1.1:8080", "loopback only")):
    r = subprocess.run([cli, "review", shots, "--listen", listen], capture_output=True, text=True, timeout=120)
    check(r.returncode == 2 and why in r.stderr and not r.stdout, f"--listen {listen}: {r.returncode} {r.stderr}")
files = lambda: {p: os.stat(p).st_mtime_ns for p in glob.glob(os.path.join(shots, "**", "*"), recursive=True)}  # noqa: E731
before = files()
rv = Review(cli, shots, *ENGINE)
for path, cookie in (("/", False), ("/?token=" + "0" * 64, False), ("/api/clips", False),
                     ("/assets/app.js", False), ("/api/view?clip=x&frame=0&view=plate", False)):
    s, _, body = rv.request("GET", path, cookie=cookie)
    check(s == 403 and b"sh010" not in body and b"<html" not in body and b"import" not in body,
          f"GET {path} without the token: {s} {body[:200]!r}")
s, h, _ = rv.request("GET", "/?token=" + rv.token, cookie=False)
set_cookie = h.get("Set-Cookie", "")
check(s == 303 and h.get("Location") == "/" and f"ck_review_{rv.port}={rv.token}" in set_cookie and
      "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie, f"token to cookie: {s} {h}")
s, h, body = rv.request("GET", "/")
check(s == 200 and b"<html" in body and "frame-ancestors 'none'" in h.get("Content-Security-Policy", ""),
      f"page with the cookie: {s}")
check(s == 200 and "sh010" in [c["name"] for c in rv.get_json("/api/clips")["clips"]], "clip list")
for host in ("evil.example", f"evil.example:{rv.port}", f"127.0.0.1:{rv.port + 1}", "localhost"):
    s, _, body = rv.request("GET", "/api/clips", host=host)
    check(s == 403 and b"sh010" not in body, f"Host {host}: {s}")
check(rv.request("GET", "/api/clips", host=f"localhost:{rv.port}")[0] == 200, "Host localhost:PORT refused")
good = {"Origin": f"http://{rv.host}", "Content-Type": "application/json"}
for hdr in ({"Content-Type": "application/json"}, {"Origin": "http://evil.example", "Content-Type": "application/json"},
            {"Origin": "null", "Content-Type": "application/json"}):
    s, _, _ = rv.request("POST", "/api/key", "{}", hdr)
    check(s == 403, f"POST with {hdr}: {s}")
check(rv.request("POST", "/api/key", "{}", good, cookie=False)[0] == 403, "POST without the cookie")
check(rv.request("POST", "/api/key", "{}", {"Origin": good["Origin"], "Content-Type": "text/plain"})[0] == 415,
      "POST text/plain")
check(rv.request("POST", "/api/key", "x" * (2 << 20), good)[0] == 413, "a 2 MiB body was not refused")
check(rv.request("GET", "/api/clips?" + "a" * 10000)[0] == 414, "a 10 kB request line was not refused")
for path in ("/raw/0/../outside/secret.txt", "/raw/0/%2e%2e/outside/secret.txt", "/raw/0/%2E%2E%2Foutside%2Fsecret.txt",
             "/raw/0/sh010/../../outside/secret.txt", "/raw/0/sh010/Input/..%2f..%2f..%2foutside/secret.txt",
             "/raw/0/%252e%252e/outside/secret.txt", "/raw/0/" + secret, "/raw/0//" + secret.lstrip("/"),
             "/raw/0/_notes/leak.txt", "/raw/1/secret.txt", "/raw/-1/secret.txt", "/assets/..%2f..%2foutside%2fsecret.txt",
             "/api/view?clip=..%2F..%2Foutside&frame=0&view=plate", "/../outside/secret.txt"):
    s, _, body = rv.request("GET", path)
    check(s in (400, 403, 404) and b"SECRET" not in body, f"GET {path}: {s} {body[:200]!r}")
check(rv.request("GET", "/raw/0/_notes/leak.txt")[0] == 403, "a symlink out was not refused with 403")
s, h, body = rv.request("GET", "/raw/0/_notes/alias.png")
check(s == 200 and body == open(os.path.join(sh010, "Input", "f01.png"), "rb").read() and
      h.get("Content-Disposition") == "attachment", f"a link inside the root: {s}")
clips = {c["name"]: c for c in rv.get_json("/api/clips")["clips"]}
check(rv.request("GET", f"/api/view?clip={clips['sh030']['id']}&frame=0&view=plate")[0] == 403,
      "a frame that is a symlink out of the roots was served")
# Keying reads what the previews may: sh030's plate leads out, so no job starts and no
# Output/ is made for it.
s, _, body = rv.request("POST", "/api/key", json.dumps({"clip": clips["sh030"]["id"]}), good)
check(s == 403 and not os.path.exists(os.path.join(sh030, "Output")), f"a key job on a plate out of the roots: {s} {body!r}")
# A request names a built-in profile, never a file (a profile loads a checkpoint and compiled code).
evil = os.path.join(outside, "evil.yaml")
with open(evil, "w") as f:
    f.write("precision: float32\n")
for path in ("/api/key", "/api/settings", "/api/write"):
    s, _, body = rv.request("POST", path, json.dumps({"clip": clips["sh010"]["id"], "profile": evil}), good)
    check(s == 400 and b"built-in profile" in body, f"POST {path} with a profile file: {s} {body!r}")
check(not os.path.exists(os.path.join(sh010, "Output", "review-settings.yaml")), "settings saved with a profile file")
# Numbers past int's range, fractional or not finite: 400, never a silently moved pixel or frame.
sid = clips["sh010"]["id"]
for q in ("frame=4294967296", "frame=0&x=1e300&y=1", "frame=0&x=nan&y=1", "frame=0&x=1.5&y=1", "frame=0&x=inf&y=1"):
    check(rv.request("GET", f"/api/probe?clip={sid}&{q}")[0] == 400, f"probe {q} was not refused")
# /raw/ streams a large file whole (not held in memory): same bytes.
s, h, body = rv.request("GET", "/raw/0/_notes/big.bin")
check(s == 200 and body == open(big, "rb").read(), f"/raw/ of a 5 MiB file: {s}, {len(body)} bytes")
check(clips["sh010"]["status"] == "partial" or clips["sh010"]["status"] == "keyed", f"status {clips['sh010']}")
check(clips["sh040"]["status"] == "none" and clips["sh020"]["hints"] == "generated", f"clips {clips}")

# ---- 3. the page in a real browser --------------------------------------------------------
with Browser() as b:
    page = b.page
    t0 = time.time()
    b.open(rv.url)
    check("token" not in page.url, f"the token stayed in the URL: {page.url}")
    cookie = [c for c in b.context.cookies() if c["name"] == f"ck_review_{rv.port}"]
    check(cookie and cookie[0]["httpOnly"] and cookie[0]["sameSite"] == "Strict", f"cookie {cookie}")
    check(page.evaluate("document.cookie") == "", "the token cookie is readable by scripts")
    listed = page.locator("#clips li").all_inner_texts()
    check(all(any(n in t for t in listed) for n in ("sh010", "sh020", "sh030", "sh040")), f"clip list {listed}")

    b.open_clip("sh010")
    page.keyboard.press("3")
    page.click("#zoom-one")
    b.scrub(4)  # the fifth frame
    b.wait_shown(4, "matte")
    matte = read(os.path.join(sh010, "Output", "Matte", "f05.exr"))
    got = b.canvas(160, 90)
    check(max_diff(got[:, :, 0], levels(matte)) <= 1 and max_diff(got[:, :, 0], got[:, :, 2]) == 0,
          "matte view != Matte/f05.exr")
    plate = read(os.path.join(sh010, "Input", "f05.png"))
    for x, y in ((80, 45), (10, 10), (100, 50)):
        b.click_image(x, y)
        page.wait_for_function(f"() => document.getElementById('probe').textContent.startsWith('x {x} y {y} ')")
        text = page.locator("#probe").inner_text()
        alpha = float(text.split("alpha ")[1].split()[0])
        rgb = [float(v) for v in text.split("plate ")[1].split("alpha")[0].split()]
        check(abs(alpha - float(matte[y, x])) <= 5e-7, f"probe alpha {alpha} != {matte[y, x]} at {x},{y}")
        check(np.abs(np.array(rgb) - plate[y, x]).max() <= 5e-7, f"probe plate {rgb} != {plate[y, x]}")
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("1")
    b.wait_shown(3, "plate")
    check(max_diff(b.canvas(160, 90), levels(read(os.path.join(sh010, "Input", "f04.png")))) <= 1, "plate view")
    page.select_option("#bg", "black")
    page.keyboard.press("4")
    b.wait_shown(3, "fg", "s.bg === 'black'")
    fg, a4 = read(os.path.join(sh010, "Output", "FG", "f04.exr")), read(os.path.join(sh010, "Output", "Matte", "f04.exr"))
    want = levels(srgb_encode(srgb_decode(fg) * a4[:, :, None]))
    check(max_diff(b.canvas(160, 90), want) <= 1, "FG over black != FG x matte in linear light")
    page.keyboard.press("6")
    b.wait_shown(3, "processed", "s.bg === 'black'")
    proc = read(os.path.join(sh010, "Output", "Processed", "f04.exr"))
    check(max_diff(b.canvas(160, 90), levels(srgb_encode(proc[:, :, :3]))) <= 1, "Processed over black")
    page.select_option("#bg", "grey")
    b.wait_shown(3, "processed", "s.bg === 'grey'")
    want = levels(srgb_encode(proc[:, :, :3] + srgb_decode(0.5) * (1 - proc[:, :, 3:4])))
    check(max_diff(b.canvas(160, 90), want) <= 1, "Processed over grey")

    b.open_clip("sh020")  # scene-linear EXR plates: OCIO to the sRGB display, with exposure
    page.keyboard.press("1")
    b.wait_shown(0, "plate")
    lin = read(os.path.join(sh020, "Input", "e1.exr"))
    check(max_diff(b.canvas(160, 90), levels(srgb_encode(lin))) <= 1, "linear EXR plate on the sRGB display")
    page.locator("#exposure").evaluate("e => { e.value = 1; e.dispatchEvent(new Event('input')); }")
    b.wait_shown(0, "plate", "s.exposure === 1")
    check(max_diff(b.canvas(160, 90), levels(srgb_encode(2 * lin))) <= 1, "exposure +1 EV")
    page.keyboard.press("2")
    b.wait_shown(0, "hint")
    check(max_diff(b.canvas(160, 90)[:, :, 0], levels(read(os.path.join(sh020, "Output", "AlphaHint", "e1.png")))) <= 1,
          "generated hint view")
    page.screenshot(path=os.path.join(work, "review.png"))

    # Playback over a slow connection (150 ms a request, the browser's own throttling): the
    # frame on screen follows the clock at 24 fps, frames that are late are dropped.
    b.open_clip("sh040")
    page.keyboard.press("1")
    b.wait_shown(0, "plate")
    cdp = b.context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": 150, "downloadThroughput": -1,
                                                  "uploadThroughput": -1})
    page.evaluate("window.ckReview.t_play = performance.now()")
    page.keyboard.press(" ")
    page.wait_for_timeout(1300)
    page.keyboard.press(" ")
    elapsed, frame, dropped, log = page.evaluate(
        "[performance.now() - window.ckReview.t_play, window.ckReview.state.frame, window.ckReview.state.dropped, "
        "window.ckReview.playLog]")
    # The frame on screen may trail the clock by the one load in flight (at least the 150 ms
    # of latency, more on a loaded machine), never by more: frames in between are dropped.
    due = int(elapsed * 24 / 1000)
    slowest = max(e["drawn"] - e["asked"] for e in log)
    lag = int(slowest * 24 / 1000) + 2
    check(len(log) >= 2 and due - lag <= frame <= due,
          f"playback fell behind: frame {frame} after {elapsed:.0f} ms (due {due}; slowest load {slowest:.0f} ms)")
    check(dropped > 0, "no frame was dropped over a 150 ms connection")
    cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": 0, "downloadThroughput": -1,
                                                  "uploadThroughput": -1})
    print(f"page checks in {time.time() - t0:.1f} s", flush=True)

rv.stop()
check(files() == before, "looking at the clips changed a file")
print(f"cli review: ok ({time.time() - t_start:.0f} s)")
