"""`inference --json` and run_inference(on_event=...) report the same events and the same
summary, key for key: both are the text of one writer (corridorkey/report_json.h), which
Python json.loads. One clip, two frames, keyed by each; every event and the summary are
compared as flattened key paths, and every value that is not a time compares equal."""

from __future__ import annotations

import json
import subprocess

from conftest import PRECISION, SAMPLE

FRAMES = "1-2"


def flatten(value, prefix=""):
    """{"a": {"b": 1}, "c": [2]} -> {"a.b": 1, "c[0]": 2}: every leaf by its key path."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else k))
        return out or {prefix: {}}
    if isinstance(value, list):
        out = {}
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}[{i}]"))
        return out or {prefix: []}
    return {prefix: value}


def is_time(path: str) -> bool:
    """A measured time differs between two runs: wall_ms, infer_wait_ms, timings.read_ms, ..."""
    return path.rsplit(".", 1)[-1].endswith("_ms")


def same(what: str, cli: dict, py: dict, loose=()):
    """Equal key paths; equal values but for times and the paths in `loose` (of the same type)."""
    c, p = flatten(cli), flatten(py)
    assert sorted(c) == sorted(p), f"{what}: keys only the CLI has {sorted(set(c) - set(p))}, " \
                                   f"only Python {sorted(set(p) - set(c))}"
    for k in c:
        if k in loose:
            assert type(c[k]) is type(p[k]), (what, k, c[k], p[k])
        elif is_time(k) and isinstance(c[k], (int, float)):
            assert isinstance(p[k], (int, float)), (what, k, c[k], p[k])
        else:
            assert c[k] == p[k], f"{what}: {k} is {c[k]!r} from the CLI, {p[k]!r} from Python"


def by_identity(events):
    """Events in a comparable order: frame events come from writer threads, in any order."""
    return sorted(events, key=lambda e: (e["event"], e.get("clip", ""), e.get("frame", "")))


def test_the_cli_and_python_report_the_same_events_and_summary(ck, cli, tmp_path):
    clip = str(SAMPLE)
    checkpoint = ck.info()["default_checkpoint"]  # one model for both (the CLI's default may be another copy)
    common = ["--frames", FRAMES, "--tune", "off", "--precision", PRECISION, "--device", "cpu",
              "--checkpoint", checkpoint, "--outputs", "matte", "--output-root"]
    p = subprocess.run([cli, "inference", clip, *common, str(tmp_path / "cli"), "--json"],
                       capture_output=True, text=True, check=True)
    lines = [json.loads(line) for line in p.stdout.splitlines()]
    assert lines and lines[-1]["event"] == "summary", p.stdout[-2000:]
    cli_events, cli_summary = lines[:-1], lines[-1]

    py_events = []
    py_summary = ck.run_inference(clip, frames=FRAMES, tune="off", model_precision=PRECISION, device="cpu",
                                  checkpoint=checkpoint, outputs=("matte",), output_root=str(tmp_path / "py"),
                                  on_event=py_events.append)

    assert [e["event"] for e in by_identity(cli_events)] == [e["event"] for e in by_identity(py_events)]
    assert sum(e["event"] == "frame_done" for e in py_events) == 2
    for c, q in zip(by_identity(cli_events), by_identity(py_events)):
        # Frames finish on writer threads in either order: a frame's count of frames done
        # may differ, the counts as a whole may not.
        same(f"event {c['event']} {c.get('frame', '')}", c, q, loose=("done",) if "frame" in c else ())
    counts = [sorted(e["done"] for e in events if e["event"] == "frame_done") for events in (cli_events, py_events)]
    assert counts[0] == counts[1] == [1, 2], counts
    # The notes name the free memory the refiner's budget was read from at load.
    same("summary", cli_summary, py_summary, loose=("engine.notes",))

    # What each side alone had before one writer made both: all of it, on both.
    keys = set(flatten(py_summary))
    for k in ("checkpoint", "device", "plan.cache", "plan.origin", "plan.trial_ms", "stage_sums.read_ms",
              "stage_sums.encoder_ms", "engine.precision", "engine.img_size", "engine.plan.trial_ms",
              "clip_models[0].clip", "frames_done", "infer_wait_ms"):
        assert k in keys, k
    assert py_summary["frames_done"] == 2 and py_summary["engine"]["precision"] == PRECISION
    done = [e for e in py_events if e["event"] == "frame_done"]
    assert set(done[0]["timings"]) == {"read_ms", "preprocess_ms", "infer_ms", "encoder_ms", "decoders_ms",
                                       "refiner_ms", "postprocess_ms", "write_ms"}


def test_the_summary_and_run_json_spell_stage_times_alike(ck, tmp_path):
    """One spelling of stage times: the summary's stage_sums, run.json's frame_times and
    key_frame's timings hold the same keys."""
    s = ck.run_inference(str(SAMPLE), frames="1", tune="off", model_precision=PRECISION, device="cpu",
                         outputs=("matte",), output_root=str(tmp_path))
    run = json.loads((tmp_path / SAMPLE.name / "run.json").read_text())
    stages = set(s["stage_sums"])
    assert stages == set(run["frame_times"][0]) - {"frame"}
    assert run["plan"]["origin"] == s["plan"]["origin"] == "off" and run["plan"]["trial_ms"] == 0
