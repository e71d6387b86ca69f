"""tools/examples/key_logc3_exr.py on a LogC3 EXR (made from the sample frame by
OpenColorIO's own Python, not by the engine): its matte equals the Matte/ file of
`corridorkey-engine inference --input-colorspace arri-logc3-ei800-awg` on the same plate."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import OpenImageIO as oiio

from conftest import SAMPLE, SOURCE, read_rgb
from test_parity import read_exr_half


def srgb_to_linear(v: np.ndarray) -> np.ndarray:
    return np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4)


def write_exr(path, pixels: np.ndarray) -> None:
    h, w, c = pixels.shape
    out = oiio.ImageOutput.create(str(path))
    assert out.open(str(path), oiio.ImageSpec(w, h, c, "float")) and out.write_image(pixels) and out.close()


def test_the_logc3_example_keys_as_the_cli(cli, tmp_path):
    lin = srgb_to_linear(read_rgb(SAMPLE / "Input" / "frame_0001.png").astype(np.float64) / 255)
    enc = subprocess.run(["/usr/bin/python3", str(SOURCE / "tests" / "pipeline" / "ocio_encode.py"), "logc3"],
                         input=" ".join(f"{x:.9g}" for x in lin.reshape(-1)), capture_output=True, text=True, check=True)
    logc = np.array(enc.stdout.split(), np.float32).reshape(lin.shape)
    clip = tmp_path / "logc"
    (clip / "Input").mkdir(parents=True)
    write_exr(clip / "Input" / "plate_0001.exr", logc)

    # One plan for both: the CLI times it into a fresh cache, the example reads it there.
    env = dict(os.environ, CORRIDORKEY_TUNE_CACHE=str(tmp_path / "plans") + "/")
    subprocess.run([cli, "inference", str(clip), "--input-colorspace", "arri-logc3-ei800-awg", "--outputs", "matte",
                    "--quiet"], check=True, env=env)
    matte = tmp_path / "matte.exr"
    r = subprocess.run([sys.executable, str(SOURCE / "tools" / "examples" / "key_logc3_exr.py"),
                        str(clip / "Input" / "plate_0001.exr"), str(matte)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    theirs = read_exr_half(next((clip / "Output" / "Matte").iterdir()))
    ours = read_exr_half(matte)
    assert ours.shape == theirs.shape
    np.testing.assert_array_equal(ours, theirs)
    assert 0.05 < float(ours.mean()) < 0.95  # a key, not an empty or a full matte
