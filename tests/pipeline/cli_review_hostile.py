#!/usr/bin/env python3
"""`corridorkey-engine review` against hostile files and connections (docs/review.md, "What
it defends against"), through the real binary, on 127.0.0.1 only, every loop bounded in time.

  cli_review_hostile.py CLI WORKDIR FIXTURES     (env CK_MAKE_CLIP: the synthetic clip generator)

Checks, each failing when the behaviour it names breaks:
  - a key (and a write) is refused, 403 naming the path, when Output/FG, Matte, Processed,
    Comp, AlphaHint or run.json is a link out of the roots, and nothing is written there; a
    key running when Output/Comp is swapped for a link out writes nothing out there (the
    frames go on into the folder it checked);
  - a run.json of 200 000 nested brackets, of objects 300 000 deep, or with fields of the
    wrong types: the clip list and the clip open (200, the error named), the server lives;
    request bodies nested deep are 400;
  - 40 connections sending a header byte a second do not delay the token holder (each of
    its requests answered in < 2 s) and are closed by the head's deadline; 300 idle
    connections do not either; 200 header lines are 431; one connection sending 160 MiB of
    header lines is cut off, the server's RSS grows by < 40 MiB and stays there after;
  - Save settings of a review started with --checkpoint-blue keeps checkpoint_blue in the
    job file and the inference line, and `job run` of the saved file, and the inference
    line, give the same Matte, FG, Processed and Comp as the review's key of a blue clip.
"""
import filecmp
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from review_support import Review, check, make_clip  # noqa: E402

cli, work, fx = sys.argv[1], sys.argv[2], sys.argv[3]
ENGINE = ["--device", "cpu", "--tune", "off", "--precision", "float32", "--checkpoint", f"{fx}/tiny128.ts"]
BLUE = f"{fx}/tiny128_seed1.safetensors"
t_start = time.time()

shutil.rmtree(work, ignore_errors=True)
shots, outside = os.path.join(work, "shots"), os.path.join(work, "outside")
os.makedirs(outside)
clip = {n: os.path.join(shots, n) for n in ("blue", "conf", "deep1", "deep2", "swap", "types")}
make_clip(clip["conf"], "--frames", "3", "--size", "64x36", "--plate", "png", "--hint", "none", "--prefix", "c")
make_clip(clip["swap"], "--frames", "200", "--size", "96x54", "--plate", "png", "--hint", "png", "--prefix", "s")
make_clip(clip["blue"], "--frames", "2", "--size", "64x36", "--plate", "png", "--hint", "png", "--prefix", "b",
          "--screen", "blue", "--soft-edge", "2")
for n in ("deep1", "deep2", "types"):
    make_clip(clip[n], "--frames", "1", "--size", "32x18", "--plate", "png", "--hint", "png", "--prefix", "d")
    os.makedirs(os.path.join(clip[n], "Output"))
runs = {"deep1": "[" * 200000 + "]" * 200000,
        "deep2": '{"a":' * 300000 + "1" + "}" * 300000,
        "types": json.dumps({"frames_done": "x", "profile": [[[1]]], "screen": {"a": 1}, "failures": "no",
                             "frame_times": [1, {"frame": 3, "infer_ms": "y"}], "plan": 5, "interrupted": "z"})}
for n, text in runs.items():
    with open(os.path.join(clip[n], "Output", "run.json"), "w") as f:
        f.write(text)

rv = Review(cli, shots, *ENGINE, "--checkpoint-blue", BLUE)
ids = {c["name"]: c["id"] for c in rv.get_json("/api/clips")["clips"]}
check(set(ids) == set(clip), f"clips listed: {sorted(ids)}")


def wait_job(job, limit=300):
    t0 = time.time()
    while time.time() - t0 < limit:
        j = [j for j in rv.get_json("/api/jobs")["jobs"] if j["id"] == job][0]
        if j["state"] in ("done", "cancelled", "failed"):
            return j
        time.sleep(0.05)
    check(False, f"job {job} did not end in {limit} s")


def alive():
    check(rv.p.poll() is None, f"review died (exit {rv.p.poll()}); stderr: {''.join(rv.stderr)[-2000:]}")


# ---- 1. writing from review is confined ---------------------------------------------------
out = os.path.join(clip["conf"], "Output")
os.makedirs(out)
for name in ("FG", "Matte", "Processed", "Comp", "AlphaHint", "run.json"):
    target = os.path.join(outside, name)
    if name == "run.json":
        with open(target, "w") as f:
            f.write("USER FILE\n")
    else:
        os.makedirs(target)
    os.symlink(target, os.path.join(out, name))
    for path, body in (("/api/key", {"clip": ids["conf"]}), ("/api/write", {"clip": ids["conf"], "despill": 3})):
        s, _, msg = rv.post_json(path, body)
        check(s == 403 and f"Output/{name}".encode() in msg,
              f"POST {path} with Output/{name} a link out: {s} {msg[:300]!r}")
    os.remove(os.path.join(out, name))
    check((open(target).read() == "USER FILE\n") if name == "run.json" else os.listdir(target) == [],
          f"something was written through the link Output/{name}")
check(rv.get_json("/api/jobs")["jobs"] == [], "a refused job was queued")
s, _, body = rv.post_json("/api/key", {"clip": ids["conf"]})
check(s == 200, f"key without links: {s} {body!r}")
job = wait_job(json.loads(body)["job"])
check(job["state"] == "done" and job["frames_done"] == 3 and not job["failures"], f"key: {job}")
for d, ext in (("Matte", "exr"), ("FG", "exr"), ("Processed", "exr"), ("Comp", "png"), ("AlphaHint", "png")):
    check(os.path.isfile(os.path.join(out, d, f"c0003.{ext}")), f"the key wrote no {d}/c0003.{ext}")
check(os.path.isfile(os.path.join(out, "run.json")), "the key wrote no run.json")

# A link swapped in while the key runs: Output/Comp moved away, a link out in its place.
swap_out, moved = (os.path.join(clip["swap"], "Output", d) for d in ("Comp", "Comp.moved"))
os.makedirs(os.path.join(outside, "swapped"))
s, _, body = rv.post_json("/api/key", {"clip": ids["swap"]})
check(s == 200, f"key of the long clip: {s} {body!r}")
jid = json.loads(body)["job"]
t0 = time.time()
while time.time() - t0 < 300:
    j = [j for j in rv.get_json("/api/jobs")["jobs"] if j["id"] == jid][0]
    if j["frames_done"] >= 3 or j["state"] != "running" and j["state"] != "queued":
        break
    time.sleep(0.01)
os.rename(swap_out, moved)
os.symlink(os.path.join(outside, "swapped"), swap_out)
at_swap = [j for j in rv.get_json("/api/jobs")["jobs"] if j["id"] == jid][0]["frames_done"]
check(at_swap <= 150, f"the key had {at_swap} of 200 frames done at the swap: a weak test (a longer clip)")
job = wait_job(jid)
check(os.listdir(os.path.join(outside, "swapped")) == [],
      f"the key wrote through a link swapped in after its check: {os.listdir(os.path.join(outside, 'swapped'))[:5]}")
check(job["state"] == "done" and len([f for f in os.listdir(moved) if f.endswith(".png")]) == 200,
      f"the frames after the swap did not go on into the folder the key checked: {job}")
print(f"confinement: 6 links refused, a swap at frame {at_swap} of 200 not followed", flush=True)

# ---- 2. no JSON input crashes review ---------------------------------------------------------
check(rv.request("GET", "/api/clips")[0] == 200, "the clip list with hostile run.json files")
for n in ("deep1", "deep2", "types"):
    s, _, body = rv.request("GET", f"/api/clip?id={ids[n]}")
    alive()
    check(s == 200, f"GET /api/clip of {n}: {s} {body[:300]!r}")
    run = json.loads(body)["run"]
    if n.startswith("deep"):
        check("nested deeper than" in run.get("error", ""), f"{n}: run {run}")
    else:
        check(run == {"frame_times": [{}], "failures": []}, f"fields of the wrong types echoed: {run}")
for text in ('{"clip":' + "[" * 500000 + "]" * 500000 + "}", "[" * 1000000, '{"a":' * 200000):
    s, _, body = rv.request("POST", "/api/key", text, {"Origin": f"http://{rv.host}", "Content-Type": "application/json"})
    alive()
    check(s == 400, f"a request body nested deep: {s} {body[:200]!r}")
check(rv.request("GET", "/api/clips")[0] == 200, "review answers after the deep inputs")


# ---- 3. serving the token holder while others misbehave ------------------------------------
def rss_mib():
    for line in open(f"/proc/{rv.p.pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def holder_ms():
    t0 = time.time()
    try:
        s = rv.request("GET", "/api/clips")[0]
    except OSError:  # a timeout: not answered
        s = 0
    ms = (time.time() - t0) * 1000
    check(s == 200, f"the token holder's request got {s} after {ms:.0f} ms")
    return ms


def connect():
    s = socket.create_connection(("127.0.0.1", rv.port), timeout=5)
    return s


head = f"GET /api/clips HTTP/1.1\r\nHost: {rv.host}\r\n"
# Slow heads: a byte a second on 40 connections, for 13 s.
slow = [connect() for _ in range(40)]
t_slow = time.time()
closed_at = {}
stop = threading.Event()


def trickle():
    t0 = time.time()
    i = 0
    while not stop.is_set() and time.time() - t0 < 13:
        for k, s in enumerate(slow):
            if k in closed_at:
                continue
            try:
                s.send(head[i % len(head)].encode())
            except OSError:
                closed_at[k] = time.time() - t0
        i += 1
        time.sleep(1)


th = threading.Thread(target=trickle)
th.start()
lat = []
for _ in range(8):
    time.sleep(1)
    lat.append(holder_ms())
check(max(lat) < 2000, f"the token holder waited behind slow connections: {[round(x) for x in lat]} ms")
th.join(20)
# 13 s after they opened, 3 s past the head's deadline: every one closed by the server.
for k, s in enumerate(slow):
    s.settimeout(max(0.1, 16 - (time.time() - t_slow)))
    try:
        data = s.recv(4096)
    except socket.timeout:
        check(False, f"slow connection {k} was still open 16 s after it opened")
    except OSError:
        data = b""
    check(data == b"" or data.startswith(b"HTTP/1.1 408"), f"a slow head got {data[:60]!r}")
    s.close()
print(f"slow heads: the token holder's requests took {min(lat):.0f}-{max(lat):.0f} ms", flush=True)

# Idle connections: 300 that send nothing.
idle = [connect() for _ in range(300)]
lat = [holder_ms() for _ in range(5)]
check(max(lat) < 2000, f"the token holder waited behind idle connections: {[round(x) for x in lat]} ms")
for s in idle:
    s.close()
print(f"300 idle connections: the token holder's requests took {min(lat):.0f}-{max(lat):.0f} ms", flush=True)

# Many headers: 200 small header lines.
many = head + f"Cookie: {rv.cookie}\r\n" + "".join(f"X-{i}: b\r\n" for i in range(200)) + "\r\n"
s = connect()
s.sendall(many.encode())
check(s.recv(100).startswith(b"HTTP/1.1 431"), "200 header lines were not refused with 431")
s.close()

# A flood of header lines: 160 MiB on one connection.
holder_ms()
before = rss_mib()
s = connect()
line = b"X-a: b\r\n" * 8192  # 64 KiB
sent, t0 = 0, time.time()
try:
    s.sendall(head.encode())
    while sent < 160 << 20 and time.time() - t0 < 120:
        s.sendall(line)
        sent += len(line)
except OSError:
    pass
during = rss_mib()
s.close()
holder_ms()
time.sleep(0.5)
after = rss_mib()
check(sent < 16 << 20, f"a flood of {sent >> 20} MiB of header lines was read on")
check(during - before < 40 and after - before < 40,
      f"RSS {before:.0f} MiB before a header flood, {during:.0f} during, {after:.0f} after")
print(f"header flood: cut off after {sent >> 10} KiB sent; RSS {before:.0f} / {during:.0f} / {after:.0f} MiB "
      "(before / during / after)", flush=True)
alive()

# ---- 4. Save settings keeps checkpoint_blue --------------------------------------------------
bout = os.path.join(clip["blue"], "Output")
s, _, body = rv.post_json("/api/key", {"clip": ids["blue"], "screen": "auto"})
check(s == 200, f"key of the blue clip: {s} {body!r}")
job = wait_job(json.loads(body)["job"])
check(job["state"] == "done" and job["frames_done"] == 2, f"blue key: {job}")
check("tiny128_seed1" in json.load(open(os.path.join(bout, "run.json")))["checkpoint"],
      "the review's key of the blue clip did not use the blue model")
ref = os.path.join(work, "blue_ref")
OUTS = ("Matte", "FG", "Processed", "Comp")
for d in OUTS:
    shutil.copytree(os.path.join(bout, d), os.path.join(ref, d))
s, _, body = rv.post_json("/api/settings", {"clip": ids["blue"]})
check(s == 200, f"save settings: {s} {body!r}")
saved = json.loads(body)
text = open(saved["path"]).read()
check(f'checkpoint_blue: "{BLUE}"' in text and f'checkpoint: "{fx}/tiny128.ts"' in text,
      f"the saved job file lacks the model fields:\n{text}")
check(f"--checkpoint-blue {BLUE}" in saved["inference"], f"the inference line lacks it: {saved['inference']}")
rv.stop()


def same_as_review(how):
    for d in OUTS:
        for f in os.listdir(os.path.join(ref, d)):
            check(filecmp.cmp(os.path.join(ref, d, f), os.path.join(bout, d, f), shallow=False),
                  f"{how}: {d}/{f} differs from the review's key")


for how, cmd in (("job run", [cli, "job", "run", saved["path"]]), ("the inference line", saved["inference"])):
    for d in OUTS:
        shutil.rmtree(os.path.join(bout, d))
    r = subprocess.run(cmd, shell=isinstance(cmd, str), capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, f"{how}: {r.returncode} {r.stderr[-2000:]}")
    same_as_review(how)
print("save settings: checkpoint_blue kept; job run and the inference line equal the review's key", flush=True)
print(f"cli review hostile: ok ({time.time() - t_start:.0f} s)")
