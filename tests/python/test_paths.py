"""Paths that are not UTF-8 (issue 47): every path argument takes str, bytes and os.PathLike
as os.fsencode encodes them, so the exact bytes reach the filesystem; paths come back as
os.fsdecode's str; messages naming such a path still print; and a C++ exception from inside
the module arrives as one of its typed errors, never RuntimeError."""

from __future__ import annotations

import errno
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import SAMPLE, SOURCE

CHECKPOINT = SOURCE / "checkpoints" / "greenformer_small_synthetic384.ts"


def forms(path: bytes) -> dict:
    """A non-UTF-8 path the three ways a host holds one: the bytes, os.fsdecode's str (with
    surrogate escapes) and a pathlib.Path of that str."""
    text = os.fsdecode(path)
    assert "\udce9" in text or "\udce8" in text, "the name must not be UTF-8"
    return {"bytes": path, "str": text, "Path": pathlib.Path(text)}


@pytest.fixture(scope="module")
def latin1_checkpoint(tmp_path_factory) -> bytes:
    """The bundled model copied to <tmp>/mod\\xe8les/m\\xe9.ts (Latin-1 bytes: not UTF-8)."""
    folder = os.path.join(os.fsencode(tmp_path_factory.mktemp("checkpoint")), b"mod\xe8les")
    os.mkdir(folder)
    path = os.path.join(folder, b"m\xe9.ts")
    shutil.copyfile(CHECKPOINT, path)
    return path


@pytest.fixture(scope="module")
def latin1_clip(tmp_path_factory) -> bytes:
    """Two frames of the sample clip in <tmp>/caf\\xe9, the plates named \\xe9cran_NNNN.png."""
    clip = os.path.join(os.fsencode(tmp_path_factory.mktemp("clips")), b"caf\xe9")
    for sub, name in (("Input", b"\xe9cran_%04d.png"), ("AlphaHint", b"frame_%04d.png")):
        os.makedirs(os.path.join(clip, sub.encode()))
        for i, src in enumerate(sorted((SAMPLE / sub).iterdir())[:2], 1):
            shutil.copyfile(src, os.path.join(clip, sub.encode(), name % i))
    return clip


def files_under(root: bytes) -> dict:
    """Every file under `root` (bytes names, relative) with its contents."""
    found = {}
    for folder, _, names in os.walk(root):
        for n in names:
            p = os.path.join(folder, n)
            with open(p, "rb") as f:
                found[os.path.relpath(p, root)] = f.read()
    return found


@pytest.mark.parametrize("form", ["bytes", "str", "Path"])
def test_a_non_utf8_checkpoint_path_loads(ck, frame1, latin1_checkpoint, form):
    model = ck.Model.load(forms(latin1_checkpoint)[form], tune="off")
    assert model.arch == "small"
    # Given back as os.fsdecode's str: the same file, its bytes restored by os.fsencode.
    assert os.path.samefile(model.checkpoint, latin1_checkpoint)
    assert os.fsencode(model.checkpoint).endswith(b"/m\xe9.ts")
    repr(model).encode("utf-8")  # printable (\xe9 shown escaped), not a lone surrogate
    plate, hint = frame1
    out = model.engine().process_frame(plate, hint, screen="green", outputs=("matte",))
    assert os.path.samefile(out["checkpoint"], latin1_checkpoint)


def test_a_non_utf8_profile_path_loads(ck, tmp_path):
    folder = os.path.join(os.fsencode(tmp_path), b"r\xe9glages")
    os.mkdir(folder)
    profile = os.path.join(folder, b"draft.yaml")
    shutil.copyfile(SOURCE / "profiles" / "draft.yaml", profile)
    for form in forms(profile).values():
        assert ck.Model.load(profile=form, tune="off").arch == "small"


@pytest.mark.parametrize("form", ["bytes", "str", "Path"])
def test_a_non_utf8_clip_keys_with_run_inference_as_the_cli_does(ck, cli, latin1_clip, latin1_checkpoint,
                                                                  tmp_path, form):
    """The clip (and its plates, and in two of the forms the output root and the checkpoint)
    named in Latin-1: keyed, the outputs where `inference` writes them, with its bytes."""
    clip = forms(latin1_clip)[form]
    root = os.path.join(os.fsencode(tmp_path), b"sortie\xe9")
    common = {"frames": "1-2", "tune": "off", "outputs": ("matte", "comp")}
    if form == "bytes":  # outputs under the clip's own Output/, the checkpoint given as bytes
        where = os.path.join(latin1_clip, b"Output")
        shutil.rmtree(where, ignore_errors=True)
        overrides = {"checkpoint": latin1_checkpoint}
    else:  # output_root as str with escapes, or as bytes
        where = os.path.join(root, b"caf\xe9")
        overrides = {"output_root": os.fsdecode(root) if form == "str" else root}
    events = []
    summary = ck.run_inference(clip, on_event=events.append, **common, **overrides)
    assert summary["frames_done"] == 2 and summary["frames_failed"] == 0, summary["failures"]
    # Names come back as os.fsdecode's str: os.fsencode gives the bytes on disk.
    assert os.path.basename(os.fsencode(summary["clip_models"][0]["clip"])) == b"caf\xe9"
    done = [e for e in events if e["event"] == "frame_done"]
    assert len(done) == 2 and os.path.basename(os.fsencode(done[0]["clip"])) == b"caf\xe9", done
    got = files_under(where)
    assert {os.path.join(b"Matte", b"\xe9cran_0001.exr"), os.path.join(b"Comp", b"\xe9cran_0002.png")} <= set(got), \
        sorted(got)

    # The CLI on the same clip (by its bytes), into a folder of its own: the same files.
    cli_root = os.path.join(os.fsencode(tmp_path), b"cli")
    subprocess.run([os.fsencode(cli), b"inference", latin1_clip, b"--output-root", cli_root, b"--frames", b"1-2",
                    b"--tune", b"off", b"--outputs", b"matte,comp", b"--checkpoint", latin1_checkpoint],
                   check=True, capture_output=True)
    want = files_under(os.path.join(cli_root, b"caf\xe9"))
    images = {k for k in want if k.split(b"/")[0] in (b"Matte", b"Comp")}
    assert images and images == {k for k in got if k.split(b"/")[0] in (b"Matte", b"Comp")}
    for k in images:
        assert got[k] == want[k], k


def test_a_str_the_filesystem_cannot_encode_is_a_config_error_naming_the_argument(ck, tmp_path):
    """\\ud800 is no surrogate escape of a byte: os.fsencode refuses it, so does the module."""
    bad = str(tmp_path) + "/\ud800"
    with pytest.raises(ck.ConfigError, match="checkpoint.*fsencode"):
        ck.Model.load(bad, tune="off")
    with pytest.raises(ck.ConfigError, match="clips.*fsencode"):
        ck.run_inference(bad, tune="off")
    with pytest.raises(ck.ConfigError, match="output_root.*fsencode"):
        ck.run_inference(str(SAMPLE), tune="off", output_root=bad)
    with pytest.raises(ck.ConfigError, match="profile.*fsencode"):
        ck.Model.load(profile=bad, tune="off")
    with pytest.raises(ck.ConfigError, match="checkpoint: not a path"):
        ck.Model.load(3.5)


def test_a_keyword_named_with_escaped_bytes_is_refused_by_name(ck, model):
    with pytest.raises(ck.ConfigError, match=r"despill\\xe9"):
        model.engine(**{"despill\udce9": 5})
    with pytest.raises(ck.ConfigError, match=r"despill\\xe9"):
        ck.Model.load(tune="off", **{"despill\udce9": 5})
    with pytest.raises(ck.ConfigError, match=r"run_inference: unknown key 'fr\\xe9mes'"):
        ck.run_inference(str(SAMPLE), **{"fr\udce9mes": "1"})


def test_a_message_naming_a_non_utf8_file_is_typed_and_prints(ck, tmp_path):
    missing = os.path.join(os.fsencode(tmp_path), b"absent\xe9.ts")
    for form in forms(missing).values():
        with pytest.raises(ck.IoError) as e:
            ck.Model.load(form, tune="off")
        assert "absent\\xe9.ts" in str(e.value), str(e.value)
        str(e.value).encode("utf-8")  # no lone surrogate: print() and logging take it


def test_an_internal_cpp_exception_arrives_typed(tmp_path):
    """A call once the exit hook has run meets the module's own guard, a std::runtime_error
    thrown inside the module: it must come out as corridorkey.Error (nanobind's default made
    it RuntimeError). In a process of its own: the hook refuses every later call."""
    script = textwrap.dedent("""
        import sys
        import corridorkey as ck
        ck._corridorkey._close_for_exit(0.0)
        try:
            ck.run_inference(sys.argv[1], tune="off")
        except ck.Error as e:
            print("typed", type(e).__name__, e)
        except BaseException as e:
            print("untyped", type(e).__name__, e)
    """)
    r = subprocess.run([sys.executable, "-c", script, str(SAMPLE)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("typed Error") and "shutting down" in r.stdout, r.stdout


def test_a_thread_that_cannot_start_is_an_io_error_with_its_errno(tmp_path):
    """run_inference starts its job on a thread of its own; with the address space capped
    below a thread's stack, std::thread throws std::system_error (EAGAIN): an IoError with
    errno set, as OSError's are (nanobind's default made it RuntimeError). Should an
    allocation fail first, std::bad_alloc must arrive typed too (ModelError, never
    MemoryError)."""
    script = textwrap.dedent("""
        import resource
        import corridorkey as ck

        def address_space():
            for line in open("/proc/self/status"):
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024

        resource.setrlimit(resource.RLIMIT_AS, (address_space() + (1 << 20), resource.RLIM_INFINITY))
        try:
            ck.run_inference("/no/such/clip", tune="off")
        except ck.Error as e:
            print("typed", type(e).__name__, getattr(e, "errno", None), e)
        except BaseException as e:
            print("untyped", type(e).__name__, e)
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert (r.stdout.startswith(f"typed IoError {errno.EAGAIN} [Errno {errno.EAGAIN}] std::system_error")
            or r.stdout.startswith("typed ModelError None out of host memory (std::bad_alloc)")), r.stdout
