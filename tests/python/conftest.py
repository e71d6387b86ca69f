"""Fixtures of the Python module's tests: the installed `corridorkey` (scripts/setup.sh puts
it in the project venv), the CLI built beside it, the sample clip, and one bundled model
loaded per session. ctest runs them once per precision the CPU runs natively
(`python.module.f32`, `python.module.bf16`) with CK_CLI, CK_SOURCE_DIR and CK_TEST_PRECISION
set: every model a test compares is loaded at that precision, or at float32 where the test is
about views and levels rather than the model, never at the precision a plan would pick."""

from __future__ import annotations

import os
import pathlib

import pytest

SOURCE = pathlib.Path(os.environ.get("CK_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
SAMPLE = SOURCE / "samples" / "greenscreen_demo"
# The precision of this run (tests/support/native_precision.sh sets it; float32 by default).
PRECISION = os.environ.get("CK_TEST_PRECISION", "float32")
assert PRECISION in ("float32", "bfloat16"), f"CK_TEST_PRECISION {PRECISION!r}: expected float32 or bfloat16"


@pytest.fixture(scope="session")
def cli() -> str:
    path = os.environ.get("CK_CLI", str(SOURCE / "build" / "apps" / "corridorkey-engine" / "corridorkey-engine"))
    assert os.access(path, os.X_OK), f"no corridorkey-engine at {path} (CK_CLI)"
    return path


@pytest.fixture(scope="session")
def ck():
    import corridorkey

    return corridorkey


@pytest.fixture(scope="session")
def model(ck):
    """The bundled demo model at its size, optimized profile, no timed plan (the flag rules:
    the same plan in every process, so results compare across processes), at this run's
    precision (the CLI runs it with `--tune off --precision PRECISION`)."""
    return ck.Model.load(tune="off", model_precision=PRECISION)


@pytest.fixture(scope="session")
def engine(model):
    return model.engine()


@pytest.fixture(scope="session")
def engine_f32(ck):
    """The same model at float32 whatever the run's precision: for tests of how inputs are
    read, whose bounds are float32 noise, not the model's precision."""
    return ck.Model.load(tune="off", model_precision="float32").engine()


def read_rgb(path: pathlib.Path):
    import cv2

    bgr = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    assert bgr is not None, path
    return bgr[:, :, ::-1].copy() if bgr.ndim == 3 else bgr


@pytest.fixture(scope="session")
def frame1():
    """Frame 1 of the sample clip as RGB uint8, and its hint (8-bit, one channel)."""
    plate = read_rgb(SAMPLE / "Input" / "frame_0001.png")
    hints = sorted((SAMPLE / "AlphaHint").iterdir())
    hint = read_rgb(hints[0])
    if hint.ndim == 3:
        hint = hint[:, :, 0].copy()
    return plate, hint
