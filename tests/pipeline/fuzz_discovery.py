#!/usr/bin/env python3
"""Fuzz-style clip discovery through the real CLI (issue 20): seeded random clips roots of
frames, junk files, folders, FIFOs, devices, symbolic links and link loops. For each tree,
either every frame is keyed or its problem is named: frames keyed + failed equal the frames
the rule of docs/clips.md ("Frames") finds, every failed or skipped entry is named by its path, and the run
never crashes and never exits 1.

  fuzz_discovery.py CLI WORKDIR CHECKPOINT [TREES]
"""
import json
import os
import random
import shutil
import subprocess
import sys

cli, work, checkpoint = sys.argv[1], sys.argv[2], sys.argv[3]
trees = int(sys.argv[4]) if len(sys.argv) > 4 else 10
make_clip = os.environ["CK_MAKE_CLIP"]
FRAME_EXT = (".png", ".jpg", ".tif", ".exr", ".webp", ".ppm")

shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
base = os.path.join(work, "base")
subprocess.run([make_clip, base, "--frames", "1", "--size", "96x54", "--plate", "png", "--hint", "png"],
               check=True)
plate = os.path.join(base, "Input", os.listdir(os.path.join(base, "Input"))[0])
hint = os.path.join(base, "AlphaHint", os.listdir(os.path.join(base, "AlphaHint"))[0])


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def build_clip(rng, clip):
    """A clip folder; returns (good, bad) entries of its Input/ by path."""
    inp = os.path.join(clip, "Input")
    os.makedirs(inp)
    good, bad = [], []
    for i in range(1, rng.randint(1, 3) + 1):
        p = os.path.join(inp, "f%d.png" % i)
        shutil.copy(plate, p)
        good.append(p)
    for k in range(rng.randint(0, 4)):
        kind = rng.choice(["dot", "thumbs", "txt", "fifo", "dir", "dev", "garbage", "link", "loop",
                           "broken", "video"])
        n = "x%d" % k
        if kind == "dot":
            open(os.path.join(inp, "." + n + ".png"), "w").write("hidden")
        elif kind == "thumbs":
            open(os.path.join(inp, "Thumbs.db"), "w").write("cache")
        elif kind == "txt":
            open(os.path.join(inp, n + ".txt"), "w").write("notes")
        elif kind == "fifo":
            p = os.path.join(inp, n + rng.choice(FRAME_EXT))
            os.mkfifo(p)
            bad.append(p)
        elif kind == "dir":
            p = os.path.join(inp, n + rng.choice(FRAME_EXT))
            os.mkdir(p)
            bad.append(p)
        elif kind == "dev":
            p = os.path.join(inp, n + ".png")
            os.symlink("/dev/null", p)
            bad.append(p)
        elif kind == "garbage":
            p = os.path.join(inp, n + rng.choice(FRAME_EXT))
            open(p, "wb").write(os.urandom(rng.randint(0, 64)))
            bad.append(p)
        elif kind == "link":
            p = os.path.join(inp, n + ".png")
            os.symlink(good[0], p)
            good.append(p)
        elif kind == "loop":
            # A link loop or a dangling link named like a frame is that frame failing, as a
            # FIFO is (issue 35: it stopped the whole clip); under another name it is ignored.
            ext = rng.choice(FRAME_EXT + (".txt",))
            p = os.path.join(inp, n + ext)
            os.symlink(os.path.basename(p), p)
            if ext != ".txt":
                bad.append(p)
        elif kind == "broken":
            p = os.path.join(inp, n + ".png")
            os.symlink(os.path.join(clip, "nowhere"), p)
            bad.append(p)
        elif kind == "video":
            open(os.path.join(inp, n + ".mov"), "w").write("movie")
    if rng.random() < 0.5:  # hint files (one per frame entry), else generated hints
        os.makedirs(os.path.join(clip, "AlphaHint"))
        for i in range(len(good) + len(bad)):
            shutil.copy(hint, os.path.join(clip, "AlphaHint", "h%d.png" % i))
    return good, bad


for t in range(trees):
    rng = random.Random(1000 + t)
    root = os.path.join(work, "tree%d" % t)
    os.makedirs(root)
    expect = {}
    for c in range(rng.randint(1, 3)):
        name = "c%d" % c
        expect[name] = build_clip(rng, os.path.join(root, name))
    extras = rng.sample(["loop", "broken", "file", "empty"], rng.randint(0, 3))
    if "loop" in extras:
        os.symlink("zloop", os.path.join(root, "zloop"))
    if "broken" in extras:
        os.symlink(os.path.join(root, "gone"), os.path.join(root, "zgone"))
    if "file" in extras:
        open(os.path.join(root, "README.txt"), "w").write("x")
    if "empty" in extras:
        os.mkdir(os.path.join(root, "zempty"))  # not a clip: no Input
    cmd = [cli, "inference", root, "--checkpoint", checkpoint, "--img-size", "128", "--profile", "original",
           "--device", "cpu", "--on-error", "skip", "--read-workers", "2", "--json"]
    try:
        r = subprocess.run(cmd, capture_output=True, timeout=300)
    except subprocess.TimeoutExpired:
        fail("tree%d: the run hung (a FIFO read?)" % t)
    where = "tree%d (seed %d)" % (t, 1000 + t)
    if r.returncode not in (0, 3, 5):
        fail("%s: exit %d: %s" % (where, r.returncode, r.stderr.decode(errors="replace")[-800:]))
    events = [json.loads(l) for l in r.stdout.decode().splitlines()]
    text = json.dumps(events)
    if r.returncode == 3:  # the run was refused as a whole: the problem must be named
        err = [e for e in events if e["event"] == "error"]
        if not err or root not in err[-1]["message"]:
            fail("%s: exit 3 without an error event naming a path: %s" % (where, text[-800:]))
        print("%s: refused, exit 3: %s" % (where, err[-1]["message"]))
        continue
    summary = [e for e in events if e["event"] == "summary"][-1]
    warnings = [e["message"] for e in events if e["event"] == "warning"]
    if summary["frames_done"] + summary["frames_failed"] != summary["frames_total"]:
        fail("%s: frames lost: %s" % (where, summary))
    for name, (good, bad) in expect.items():
        done = [e["file"] for e in events if e["event"] == "frame_done" and e.get("clip") == name]
        failed = {e["file"] for e in events if e["event"] == "frame_failed" and e.get("clip") == name}
        if sorted(done) != sorted(good):
            fail("%s: clip %s keyed %s, expected %s" % (where, name, sorted(done), sorted(good)))
        if failed != set(bad):
            fail("%s: clip %s failed %s, expected %s" % (where, name, sorted(failed), sorted(bad)))
    if "loop" in extras and not any(w.startswith(os.path.join(root, "zloop") + ": ") for w in warnings):
        fail("%s: the root's link loop was not named: %s" % (where, warnings))
    print("%s: %d clip(s), exit %d: ok" % (where, len(expect), r.returncode))
print("fuzz discovery: ok")
