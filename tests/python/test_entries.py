"""One plate, every entry: `corridorkey-engine inference`, Python's process_frame and serve's
frame.key key a green plate, and a blue plate with checkpoint_blue, to the same matte. The
engine holds the blue-screen model (loaded on the first blue plate), so a blue plate goes to it
in every entry, unswapped, not to the green model with a channel swap.

- Python's float32 matte and serve's (the C++ key_frame over a shared-memory view, written as
  float32) are bit-identical;
- serve's Matte EXR and inference's are byte-identical, and equal that matte rounded to half.

The bundled model stands in for the blue one: given as checkpoint_blue it keys the blue plate
unswapped, which gives another matte than the swap around the green model."""

from __future__ import annotations

import subprocess
import sys
from multiprocessing import shared_memory

import numpy as np
import OpenImageIO as oiio
import pytest

from conftest import PRECISION, SOURCE

sys.path.insert(0, str(SOURCE / "tools"))
from corridorkey_client import Client, shm_image  # noqa: E402


def read_exr_half(path):
    inp = oiio.ImageInput.open(str(path))
    assert inp, oiio.geterror()
    px = inp.read_image(0, 0, 0, inp.spec().nchannels, "half")
    inp.close()
    return px


@pytest.mark.parametrize("backing", ["green", "blue"])
def test_every_entry_keys_a_plate_to_the_same_matte(cli, ck, tmp_path, frame1, backing):
    import cv2

    plate, hint = frame1
    if backing == "blue":
        plate = plate[:, :, [0, 2, 1]].copy()  # green and blue exchanged: the plate on a blue backing
    h, w = hint.shape
    clip = tmp_path / "clips" / "shot"
    (clip / "Input").mkdir(parents=True)
    (clip / "AlphaHint").mkdir()
    assert cv2.imwrite(str(clip / "Input" / "frame_0001.png"), plate[:, :, ::-1])
    assert cv2.imwrite(str(clip / "AlphaHint" / "frame_0001.png"), hint)
    bundled = ck.info()["default_checkpoint"]
    engine_args = ["--device", "cpu", "--tune", "off", "--precision", PRECISION, "--checkpoint-blue", bundled]
    out = tmp_path / "out"
    subprocess.run([cli, "inference", str(clip), "--output-root", str(out), *engine_args, "--screen", backing,
                    "--quiet"], check=True)
    inferred = out / "shot" / "Matte" / "frame_0001.exr"

    python = ck.Model.load(tune="off", model_precision=PRECISION, checkpoint_blue=bundled).engine()
    r = python.process_frame(plate, hint, screen=backing)
    assert r["screen"] == backing
    np.testing.assert_array_equal(read_exr_half(inferred).reshape(h, w), r["matte"].astype(np.float16))

    sp = shared_memory.SharedMemory(create=True, size=plate.nbytes)
    sm = shared_memory.SharedMemory(create=True, size=w * h * 4)
    try:
        np.ndarray(plate.shape, np.uint8, sp.buf)[:] = plate
        with Client.spawn(cli, engine_args, stderr=subprocess.DEVNULL) as serve:
            serve.key(shm_image(sp.name, w, h, 3, "uint8"), hint=str(clip / "AlphaHint" / "frame_0001.png"),
                      outputs={"matte": shm_image(sm.name, w, h, 1, "float32")}, screen=backing)
            served = np.ndarray((h, w), np.float32, sm.buf).copy()
            file = tmp_path / "served_matte.exr"
            serve.key(str(clip / "Input" / "frame_0001.png"), hint=str(clip / "AlphaHint" / "frame_0001.png"),
                      outputs={"matte": str(file)}, screen=backing)
        np.testing.assert_array_equal(served, r["matte"])  # bit for bit, float32
        assert file.read_bytes() == inferred.read_bytes()
    finally:
        for s in (sp, sm):
            s.close()
            s.unlink()

    if backing == "blue":
        # Without checkpoint_blue the green model keys it swapped: another matte, so the one
        # above came from the blue model.
        swapped = ck.Model.load(tune="off", model_precision=PRECISION).engine().process_frame(plate, hint, screen="blue")
        assert np.abs(swapped["matte"].astype(np.float32) - r["matte"].astype(np.float32)).max() > 1e-3
