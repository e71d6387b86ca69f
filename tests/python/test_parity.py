"""process_frame against `corridorkey-engine inference` on the sample clip: every output
equals the file the CLI wrote, after the writer's quantisation (half-float EXR for Matte, FG
and Processed; Comp as 8-bit PNG, clipped and truncated as the reference writes it), bit for
bit, with the clip's hints and with generated ones."""

from __future__ import annotations

import subprocess

import numpy as np
import OpenImageIO as oiio
import pytest

from conftest import PRECISION, SAMPLE, read_rgb


def read_exr_half(path):
    inp = oiio.ImageInput.open(str(path))
    assert inp, oiio.geterror()
    spec = inp.spec()
    px = inp.read_image(0, 0, 0, spec.nchannels, "half")
    inp.close()
    return px


def comp_png_levels(comp: np.ndarray) -> np.ndarray:
    """The Comp writer's 8 bits: clip to [0, 1], times 255 in float32, truncated; NaN -> 0."""
    c = np.nan_to_num(comp.astype(np.float32), nan=0.0)
    return (np.clip(c, 0, 1) * np.float32(255)).astype(np.uint8)


@pytest.mark.parametrize("hints", ["files", "chroma"])
def test_outputs_equal_the_cli_files(cli, engine, tmp_path, hints):
    out_root = tmp_path / "out"
    subprocess.run([cli, "inference", str(SAMPLE), "--output-root", str(out_root), "--frames", "1-2",
                    "--tune", "off", "--precision", PRECISION, "--hint", hints, "--quiet"], check=True)
    clip_out = out_root / SAMPLE.name
    for n in (1, 2):
        plate = read_rgb(SAMPLE / "Input" / f"frame_{n:04d}.png")
        hint = read_rgb(SAMPLE / "AlphaHint" / f"frame_{n:04d}.png") if hints == "files" else None
        r = engine.process_frame(plate, hint)
        files = {k: sorted((clip_out / d).glob(f"*{n:04d}*"))[0]
                 for k, d in (("matte", "Matte"), ("fg", "FG"), ("processed", "Processed"), ("comp", "Comp"))}
        matte = read_exr_half(files["matte"])
        assert matte.shape[:2] == r["matte"].shape
        np.testing.assert_array_equal(matte.reshape(r["matte"].shape), r["matte"].astype(np.float16))
        np.testing.assert_array_equal(read_exr_half(files["fg"]), r["fg"].astype(np.float16))
        np.testing.assert_array_equal(read_exr_half(files["processed"]), r["processed"].astype(np.float16))
        np.testing.assert_array_equal(read_rgb(files["comp"]), comp_png_levels(r["comp"]))
        assert r["screen"] == "green"


def test_output_colour_spaces_equal_the_cli_files(cli, engine, tmp_path):
    """output_colorspace / fg_colorspace: processed and fg as `inference --output-colorspace
    / --fg-colorspace` writes them; the matte and comp are not converted."""
    out_root = tmp_path / "out"
    subprocess.run([cli, "inference", str(SAMPLE), "--output-root", str(out_root), "--frames", "1", "--tune", "off",
                    "--precision", PRECISION,
                    "--output-colorspace", "acescg", "--fg-colorspace", "linear-rec709", "--quiet"], check=True)
    clip_out = out_root / SAMPLE.name
    plate = read_rgb(SAMPLE / "Input" / "frame_0001.png")
    hint = read_rgb(SAMPLE / "AlphaHint" / "frame_0001.png")
    r = engine.process_frame(plate, hint, output_colorspace="acescg", fg_colorspace="linear-rec709")
    plain = engine.process_frame(plate, hint)
    files = {k: sorted((clip_out / d).glob("*0001*"))[0]
             for k, d in (("matte", "Matte"), ("fg", "FG"), ("processed", "Processed"), ("comp", "Comp"))}
    np.testing.assert_array_equal(read_exr_half(files["fg"]), r["fg"].astype(np.float16))
    np.testing.assert_array_equal(read_exr_half(files["processed"]), r["processed"].astype(np.float16))
    np.testing.assert_array_equal(read_rgb(files["comp"]), comp_png_levels(r["comp"]))
    np.testing.assert_array_equal(r["matte"], plain["matte"])
    # Converted: not the unconverted arrays (sRGB fg, Rec.709 processed).
    assert np.abs(r["fg"] - plain["fg"]).max() > 0.05
    assert np.abs(r["processed"] - plain["processed"]).max() > 0.01
    with pytest.raises(ValueError, match="output_colorspace"):
        engine.process_frame(plate, hint, output_colorspace="")
