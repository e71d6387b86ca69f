"""Fixtures of the Python module's tests: the installed `corridorkey` (scripts/setup.sh puts
it in the project venv), the CLI built beside it, the sample clip, and one bundled model
loaded per session. ctest runs them (`python.module`) with CK_CLI and CK_SOURCE_DIR set."""

from __future__ import annotations

import os
import pathlib

import pytest

SOURCE = pathlib.Path(os.environ.get("CK_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
SAMPLE = SOURCE / "samples" / "greenscreen_demo"


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
    the same plan in every process, so results compare across processes)."""
    return ck.Model.load(tune="off")


@pytest.fixture(scope="session")
def engine(model):
    return model.engine()


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
