"""Key an ARRI LogC3 EXR plate in-process and write its matte, with PyPI's OpenImageIO.

    python tools/examples/key_logc3_exr.py PLATE.exr MATTE.exr [--hint HINT.exr]
        [--checkpoint /models/CorridorKey.safetensors] [--img-size 2048]

The plate's pixels stay LogC3 (EI 800, ARRI Wide Gamut 3): the engine converts them with
OpenColorIO (input_colorspace="arri-logc3-ei800-awg"), keys, and returns the matte as a
float32 array, written here as a half-float EXR with one channel "Y", as
`corridorkey-engine inference` writes Matte/. Without --checkpoint the bundled demo model
keys it (a small model for trying the API, not for production mattes).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import OpenImageIO as oiio

import corridorkey


def read_rgb(path: str) -> np.ndarray:
    inp = oiio.ImageInput.open(path)
    if not inp:
        raise SystemExit(f"{path}: {oiio.geterror()}")
    pixels = inp.read_image(0, 0, 0, 3, "float")  # HxWx3 float32: R, G, B
    inp.close()
    return pixels


def write_matte(path: str, matte: np.ndarray) -> None:
    h, w = matte.shape
    spec = oiio.ImageSpec(w, h, 1, "half")
    spec.channelnames = ("Y",)
    out = oiio.ImageOutput.create(path)
    # HxWx1, not HxW: OpenImageIO 3.2's Python write_image misreads a 2-D array.
    if not out or not out.open(path, spec) or not out.write_image(matte[:, :, None]) or not out.close():
        raise SystemExit(f"{path}: {oiio.geterror()}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("plate")
    ap.add_argument("matte")
    ap.add_argument("--hint", help="a one-channel hint image (0..1); generated when not given")
    ap.add_argument("--checkpoint", help="default: the bundled demo model")
    ap.add_argument("--img-size", type=int, default=0)
    a = ap.parse_args(argv)
    plate = read_rgb(a.plate)
    hint = None
    if a.hint:
        inp = oiio.ImageInput.open(a.hint)
        hint = inp.read_image(0, 0, 0, 1, "float")
        inp.close()
    model = corridorkey.Model.load(a.checkpoint, img_size=a.img_size)
    out = model.engine().process_frame(plate, hint, input_colorspace="arri-logc3-ei800-awg", outputs=("matte",))
    write_matte(a.matte, out["matte"])
    print(f"{a.matte}: {plate.shape[1]}x{plate.shape[0]}, {out['screen']} backing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
