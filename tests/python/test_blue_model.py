"""The blue-screen model through the Python module: a Model loaded with checkpoint_blue keys a
blue plate with it (loaded on the first blue plate, held by the engine), exactly as
`corridorkey-engine inference --checkpoint-blue` does, not with the green model and a channel
swap. The bundled model stands in for the blue one: given as checkpoint_blue it keys the blue
plate unswapped, which gives another matte than the swap around the green model."""

from __future__ import annotations

import subprocess

import numpy as np
import OpenImageIO as oiio

from conftest import PRECISION


def read_exr_half(path):
    inp = oiio.ImageInput.open(str(path))
    assert inp, oiio.geterror()
    px = inp.read_image(0, 0, 0, inp.spec().nchannels, "half")
    inp.close()
    return px


def test_a_blue_plate_keys_with_the_blue_model_as_inference_does(cli, ck, tmp_path, frame1):
    import cv2

    plate, hint = frame1
    blue = plate[:, :, [0, 2, 1]].copy()  # green and blue exchanged: the plate on a blue backing
    clip = tmp_path / "clips" / "blueshot"
    (clip / "Input").mkdir(parents=True)
    (clip / "AlphaHint").mkdir()
    assert cv2.imwrite(str(clip / "Input" / "frame_0001.png"), blue[:, :, ::-1])
    assert cv2.imwrite(str(clip / "AlphaHint" / "frame_0001.png"), hint)
    bundled = ck.info()["default_checkpoint"]
    out = tmp_path / "out"
    subprocess.run([cli, "inference", str(clip), "--output-root", str(out), "--tune", "off", "--precision",
                    PRECISION, "--checkpoint-blue", bundled, "--screen", "blue", "--quiet"], check=True)
    matte = read_exr_half(sorted((out / "blueshot" / "Matte").iterdir())[0])

    with_blue = ck.Model.load(tune="off", model_precision=PRECISION, checkpoint_blue=bundled).engine()
    r = with_blue.process_frame(blue, hint, screen="blue")
    assert r["screen"] == "blue"
    np.testing.assert_array_equal(matte.reshape(r["matte"].shape), r["matte"].astype(np.float16))

    # Without checkpoint_blue the green model keys it swapped: another matte, so the one above
    # came from the blue model.
    swapped = ck.Model.load(tune="off", model_precision=PRECISION).engine().process_frame(blue, hint, screen="blue")
    assert np.abs(swapped["matte"].astype(np.float32) - r["matte"].astype(np.float32)).max() > 1e-3
