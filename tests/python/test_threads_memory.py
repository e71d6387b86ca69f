"""Engines of one Model key from Python threads at the same time (the GIL is released) with
the bits of sequential calls; a Model lives as long as an engine on it; keying many frames
does not grow memory."""

from __future__ import annotations

import gc
import threading
import time

import numpy as np


def test_two_threads_on_one_model_overlap_and_match_sequential(model, frame1):
    plate, hint = frame1
    engines = [model.engine(), model.engine()]
    plates = [plate, np.roll(plate, 7, axis=1)]
    sequential = [e.process_frame(p, hint)["matte"] for e, p in zip(engines, plates)]
    spans = [None, None]
    results = [None, None]

    def run(i):
        t0 = time.perf_counter()
        for _ in range(3):
            results[i] = engines[i].process_frame(plates[i], hint)["matte"]
        spans[i] = (t0, time.perf_counter())

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(2):
        np.testing.assert_array_equal(results[i], sequential[i])
    (a0, a1), (b0, b1) = spans
    assert a0 < b1 and b0 < a1, f"the two threads' keying did not overlap: {spans}"


def test_an_engine_keeps_its_model_alive(ck, frame1):
    plate, hint = frame1
    m = ck.Model.load(tune="off")
    e = m.engine()
    before = e.process_frame(plate, hint)["matte"]
    del m
    gc.collect()
    np.testing.assert_array_equal(e.process_frame(plate, hint)["matte"], before)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_two_hundred_frames_at_384_grow_rss_by_less_than_5_percent(engine, frame1):
    plate, hint = frame1
    assert engine.info()["img_size"] == 384
    for _ in range(20):  # warm: allocator pools, the engine's caches
        engine.process_frame(plate, hint)
    start = rss_bytes()
    for _ in range(200):
        out = engine.process_frame(plate, hint)
        del out
    grown = rss_bytes() - start
    assert grown < 0.05 * start, f"RSS grew {grown / 2**20:.1f} MiB over {start / 2**20:.1f} MiB"


def test_log_lines_from_threads_that_hold_and_that_gave_up_the_gil_do_not_deadlock(ck, tmp_path):
    """A profile file's warning is logged while Python parses it (the GIL held); an engine's
    refiner line while it is built (the GIL given up): both at once used to freeze."""
    import subprocess
    import sys

    partial = tmp_path / "partial.yaml"
    partial.write_text("tile_size: 256\n")
    code = (
        "import threading, corridorkey\n"
        "def w():\n"
        f"    for _ in range(60): corridorkey.Model.load(profile={str(partial)!r}, tune='off').engine()\n"
        "ts = [threading.Thread(target=w) for _ in range(2)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "print('done')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "done" in r.stdout, r.stderr[-2000:]


def test_the_process_ends_cleanly_with_a_daemon_thread_keying(ck, tmp_path):
    import subprocess
    import sys

    from conftest import SAMPLE

    code = (
        "import threading, time, cv2, corridorkey\n"
        f"p = cv2.imread({str(SAMPLE / 'Input' / 'frame_0001.png')!r})[:, :, ::-1].copy()\n"
        "e = corridorkey.Model.load(tune='off').engine()\n"
        "threading.Thread(target=lambda: [e.process_frame(p) for _ in iter(int, 1)], daemon=True).start()\n"
        "time.sleep(1.5)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert "leaked" not in r.stderr
