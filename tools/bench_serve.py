#!/usr/bin/env python3
"""Benchmarks of `corridorkey-engine serve` against the issue's targets (docs/embedding.md,
"corridorkey-engine serve"). Medians over repeated runs; the CPU model is printed with the numbers.

  bench_serve.py --engine build/apps/corridorkey-engine/corridorkey-engine [--work DIR]

1. frame.repost on a 1920x1080 frame with shared-memory outputs (processed + comp), the
   round trip as the client sees it and the server's own total; then the same with file
   outputs, which adds the EXR / PNG encoding.
2. frame.key through `serve --stdio` with paths in and out, against `inference` on the same
   frames (same checkpoint, profile, threads): per-frame time including I/O, and the ratio.
   The checkpoint is a seeded hiera_base_plus state_dict at --size, written by
   torch.save(model.state_dict()) as users' checkpoints are, unless --checkpoint is given.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from corridorkey_client import Client, shm_image  # noqa: E402


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def synthetic_plate(path, hint_path, w, h, seed=0):
    """A green screen with a soft-edged subject and a little spill: PNG plate + PNG hint."""
    import cv2
    import numpy as np
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    cx, cy = w * (0.45 + 0.1 * rng.random()), h * 0.5
    r = min(w, h) * 0.3
    d = np.sqrt((xx - cx) ** 2 + (yy - cy) ** 2)
    alpha = np.clip((r - d) / (0.02 * min(w, h)) + 0.5, 0, 1)
    subject = np.stack([0.8 * np.ones_like(xx), 0.55 + 0.2 * (yy / h), 0.4 * np.ones_like(xx)], -1)
    screen = np.array([0.1, 0.75, 0.2], np.float32)
    rgb = subject * alpha[..., None] + screen * (1 - alpha[..., None])
    rgb += rng.normal(0, 0.01, rgb.shape).astype(np.float32)
    cv2.imwrite(path, (np.clip(rgb, 0, 1)[..., ::-1] * 255).round().astype(np.uint8))
    hint = cv2.GaussianBlur((alpha > 0.5).astype(np.float32), (0, 0), 3)
    cv2.imwrite(hint_path, (hint * 255).round().astype(np.uint8))


def make_checkpoint(path, size):
    sys.path.insert(0, HERE)
    import torch
    from greenformer_ref import build_greenformer, randomize_
    model = randomize_(build_greenformer("hiera_base_plus", size), seed=0)
    torch.save(model.state_dict(), path)


def bench_repost(engine, work, runs, threads):
    import numpy as np
    from multiprocessing import shared_memory
    w, h = 1920, 1080
    plate, hint = os.path.join(work, "plate1080.png"), os.path.join(work, "hint1080.png")
    synthetic_plate(plate, hint, w, h)
    args = ["--device", "cpu", "--threads", str(threads)]
    out = {}
    with Client.spawn(engine, args, stderr=subprocess.DEVNULL) as ck:
        r = ck.key(plate, hint=hint, outputs={})
        fid = r["frame_id"]
        out["key_ms"] = r["timings"]["total_ms"]
        blocks = {k: shared_memory.SharedMemory(create=True, size=w * h * c * 4) for k, c in
                  (("matte", 1), ("fg", 3), ("processed", 4), ("comp", 3))}
        try:
            def shm(k, c):
                return shm_image(blocks[k].name, w, h, c, "float32")

            for label, outs in (("processed+comp", {"processed": shm("processed", 4), "comp": shm("comp", 3)}),
                                ("processed", {"processed": shm("processed", 4)}),
                                ("all four", {"matte": shm("matte", 1), "fg": shm("fg", 3),
                                              "processed": shm("processed", 4), "comp": shm("comp", 3)})):
                rt, server = [], []
                for i in range(runs):
                    t = time.perf_counter()
                    rr = ck.repost(fid, outputs=outs, despill=(i % 10) + 0.5)
                    rt.append((time.perf_counter() - t) * 1000)
                    server.append(rr["timings"]["total_ms"])
                out[f"shm {label}"] = {"round_trip_ms": statistics.median(rt), "server_ms": statistics.median(server),
                                       "postprocess_ms": rr["timings"]["postprocess_ms"]}
            files = {"processed": os.path.join(work, "rp.exr"), "comp": os.path.join(work, "rp.png")}
            rt, enc = [], []
            for i in range(max(3, runs // 4)):
                t = time.perf_counter()
                rr = ck.repost(fid, outputs=files, despill=(i % 10) + 0.5)
                rt.append((time.perf_counter() - t) * 1000)
                enc.append(rr["timings"]["write_ms"])
            out["files processed+comp"] = {"round_trip_ms": statistics.median(rt), "encode_ms": statistics.median(enc)}
        finally:
            for b in blocks.values():
                b.close()
                b.unlink()
    return out


def bench_key(engine, work, checkpoint, size, frames, threads, profile):
    clip = os.path.join(work, f"clip{size}")
    os.makedirs(os.path.join(clip, "Input"), exist_ok=True)
    os.makedirs(os.path.join(clip, "AlphaHint"), exist_ok=True)
    for i in range(frames):
        synthetic_plate(os.path.join(clip, "Input", f"f{i:04d}.png"), os.path.join(clip, "AlphaHint", f"f{i:04d}.png"),
                        size, size, seed=i)
    common = ["--device", "cpu", "--threads", str(threads), "--checkpoint", checkpoint, "--profile", profile]
    # inference: the whole clip; per frame = the pipeline's wall time / frames (no load)
    p = subprocess.run([engine, "inference", clip, *common, "--json", "--output-root", os.path.join(work, "cli_out")],
                       capture_output=True, text=True, check=True)
    summary = [json.loads(l) for l in p.stdout.splitlines() if '"summary"' in l][-1]
    cli_ms = summary["wall_ms"] / summary["frames_done"]
    # serve: model.load first (not timed), then frame.key one after another, paths in and out
    serve_out = os.path.join(work, "serve_out")
    os.makedirs(serve_out, exist_ok=True)
    with Client.spawn(engine, common, stderr=subprocess.DEVNULL) as ck:
        ck.load()
        per = []
        t_all = time.perf_counter()
        for i in range(frames):
            t = time.perf_counter()
            o = {k: os.path.join(serve_out, f"{k}{i:04d}.{'png' if k == 'comp' else 'exr'}")
                 for k in ("fg", "matte", "processed", "comp")}
            ck.key(os.path.join(clip, "Input", f"f{i:04d}.png"), hint=os.path.join(clip, "AlphaHint", f"f{i:04d}.png"),
                   outputs=o)
            per.append((time.perf_counter() - t) * 1000)
        serve_ms = (time.perf_counter() - t_all) * 1000 / frames
    return {"inference_ms_per_frame": cli_ms, "serve_ms_per_frame": serve_ms,
            "serve_median_ms": statistics.median(per), "ratio": serve_ms / cli_ms, "frames": frames}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", required=True)
    ap.add_argument("--work", default="/tmp/ck-bench-serve")
    ap.add_argument("--checkpoint", help="hiera_base_plus checkpoint (default: a seeded one at --size)")
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--frames", type=int, default=6)
    ap.add_argument("--runs", type=int, default=20, help="frame.repost repetitions")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--profile", default="optimized")
    ap.add_argument("--skip-key", action="store_true", help="only the frame.repost part")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    print(f"cpu: {cpu_model()}, {os.cpu_count()} cores; threads {a.threads}")
    rep = bench_repost(a.engine, a.work, a.runs, a.threads)
    print("frame.repost 1920x1080 (medians):")
    print(json.dumps(rep, indent=2))
    if not a.skip_key:
        ckpt = a.checkpoint or os.path.join(a.work, f"hiera_base_plus_seed0_{a.size}.pth")
        if not os.path.exists(ckpt):
            make_checkpoint(ckpt, a.size)
        key = bench_key(a.engine, a.work, ckpt, a.size, a.frames, a.threads, a.profile)
        print(f"frame.key vs inference, hiera_base_plus at {a.size}, profile {a.profile}:")
        print(json.dumps(key, indent=2))


if __name__ == "__main__":
    main()
