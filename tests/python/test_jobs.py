"""run_inference: the summary and events as dicts; a callback that raises stops the job and
its exception comes out; Ctrl-C cancels the job and raises KeyboardInterrupt; neither
leaves a partial file."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from conftest import SAMPLE


def no_partial_files(root: pathlib.Path):
    left = [p for p in root.rglob("*") if "ck-tmp" in p.name]
    assert not left, f"temporary files left: {left}"


def test_a_job_reports_events_and_a_summary(ck, tmp_path):
    events = []
    s = ck.run_inference([str(SAMPLE)], output_root=str(tmp_path), frames="1-2", tune="off",
                         on_event=events.append, outputs=("matte", "comp"))
    assert s["frames_done"] == 2 and s["frames_failed"] == 0 and not s["interrupted"]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "job_started" and kinds[-1] == "job_done" and kinds.count("frame_done") == 2
    assert events[0]["plan"]["origin"] == "off"
    # The NDJSON fields of `inference --json`, event for event.
    done = [e for e in events if e["event"] == "frame_done"]
    assert {"clip", "frame", "file", "done", "total", "timings"} <= set(done[-1])
    assert done[-1]["done"] == 2 and done[-1]["total"] == 2 and done[-1]["timings"]["infer_ms"] > 0
    assert len(list((tmp_path / SAMPLE.name / "Matte").iterdir())) == 2
    assert not (tmp_path / SAMPLE.name / "FG").exists()


def test_a_raising_callback_stops_the_job_and_its_exception_comes_out(ck, tmp_path):
    class Stop(RuntimeError):
        pass

    seen = []

    def on_event(e):
        seen.append(e["event"])
        if e["event"] == "frame_done":
            raise Stop("enough")

    with pytest.raises(Stop, match="enough"):
        ck.run_inference([str(SAMPLE)], output_root=str(tmp_path), tune="off", on_event=on_event)
    assert seen.count("frame_done") == 1, seen  # not called again after it raised
    no_partial_files(tmp_path)
    done = list((tmp_path / SAMPLE.name / "Matte").iterdir())
    assert 1 <= len(done) < 16


def test_ctrl_c_cancels_the_job_and_raises_keyboard_interrupt(cli, tmp_path):
    """In a child process, as a user's script runs: SIGINT after the first frame."""
    clip = tmp_path / "long"
    make_clip = os.environ.get("CK_MAKE_CLIP")
    if make_clip:
        subprocess.run([make_clip, str(clip), "--frames", "40", "--size", "640x360"], check=True)
    else:  # the sample clip five times over is long enough
        (clip / "Input").mkdir(parents=True)
        for i, src in enumerate(sorted((SAMPLE / "Input").iterdir()) * 3):
            (clip / "Input" / f"f_{i:04d}.png").write_bytes(src.read_bytes())
    script = textwrap.dedent(f"""
        import os, signal, sys, corridorkey
        sent = []
        def on_event(e):
            if e["event"] == "frame_done" and not sent:
                sent.append(1)
                os.kill(os.getpid(), signal.SIGINT)
        try:
            corridorkey.run_inference([{str(clip)!r}], tune="off", on_event=on_event)
        except KeyboardInterrupt:
            print("interrupted")
            sys.exit(7)
        print("finished")
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert r.returncode == 7 and "interrupted" in r.stdout, (r.returncode, r.stdout, r.stderr[-2000:])
    no_partial_files(clip)
    done = list((clip / "Output" / "Matte").iterdir())
    assert 1 <= len(done) < 40, f"{len(done)} frames written: the job was not cancelled"
