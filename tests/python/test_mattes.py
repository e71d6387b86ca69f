"""Garbage and holdout mattes from Python (docs/clips.md, "Garbage and holdout mattes"):
process_frame's `garbage=` / `holdout=` arrays and run_inference's `garbage_matte` /
`holdout_matte` files. The final matte is max(alpha x (1 - garbage), holdout), so it is
exactly 0 under a garbage of 1 and exactly 1 under a holdout of 1 whatever the model keys:
the tiny random model shows that as well as a trained one, in a fraction of the time. Models
load at float32: these tests are about how mattes are read and applied, not the model."""

from __future__ import annotations

import numpy as np
import OpenEXR
import OpenImageIO as oiio
import pytest

from conftest import SOURCE

TINY = SOURCE / "checkpoints" / "greenformer_tiny_random128.ts"
H, W = 48, 64


@pytest.fixture(scope="module")
def tiny(ck):
    return ck.Model.load(str(TINY), tune="off", model_precision="float32").engine()


def plate_and_hint(seed=0):
    """A green plate with a grey subject and noise (uint8 RGB), and its hint (uint8, one channel)."""
    rng = np.random.default_rng(seed)
    plate = np.empty((H, W, 3), np.uint8)
    plate[:] = (40, 170, 60)
    plate[12:40, 20:52] = (120, 116, 110)
    plate = np.clip(plate.astype(np.int16) + rng.integers(-12, 13, plate.shape), 0, 255).astype(np.uint8)
    hint = np.zeros((H, W), np.uint8)
    hint[12:40, 20:52] = 255
    return plate, hint


def regions(flip=False):
    """Garbage (left columns, a 0.5 soft edge) and holdout (a box in the subject), float32 HxW,
    mirrored left to right with `flip` (another frame's mattes)."""
    g = np.zeros((H, W), np.float32)
    g[:, :16] = 1.0
    g[:, 16:20] = 0.5
    h = np.zeros((H, W), np.float32)
    h[18:30, 36:50] = 1.0
    return (g[:, ::-1].copy(), h[:, ::-1].copy()) if flip else (g, h)


def assert_matted(r, g, h):
    """Matte and Processed's alpha exactly 0 under garbage 1, exactly 1 under holdout 1;
    Processed transparent black under the garbage (premultiplied by 0)."""
    m, p = r["matte"], r["processed"]
    assert (m[g == 1] == 0.0).all(), m[g == 1].max()
    assert (m[h == 1] == 1.0).all(), m[h == 1].min()
    assert (p[..., 3][g == 1] == 0.0).all() and (p[..., :3][g == 1] == 0.0).all()
    assert (p[..., 3][h == 1] == 1.0).all(), p[..., 3][h == 1].min()


def test_mattes_set_the_matte_and_processed_alpha_exactly(tiny):
    plate, hint = plate_and_hint()
    g, h = regions()
    plain = tiny.process_frame(plate, hint, screen="green")
    # The random model keys neither region to exactly 0 or 1 on its own: the mattes do it.
    assert (plain["matte"][g == 1] > 0).any() and (plain["matte"][h == 1] < 1).any()
    r = tiny.process_frame(plate, hint, screen="green", garbage=g, holdout=h)
    assert_matted(r, g, h)
    # The soft edge: alpha x 0.5, never more.
    assert (r["matte"][:, 16:20] <= plain["matte"][:, 16:20] * 0.5 + 1e-6).all()


def test_integer_mattes_grey_rgb_and_one_channel_key_as_float_ones(tiny):
    """A uint8 grey RGB garbage matte (as a grey PNG is often saved: R taken) and a uint16
    one-channel holdout read as the float32 mattes of the same 0/1 regions, bit for bit."""
    plate, hint = plate_and_hint()
    g, h = regions()
    g = (g == 1).astype(np.float32)  # 0/1 only: 255 and 65535 are exactly 1.0, unlike a 0.5 edge
    g8 = np.repeat((g * 255).astype(np.uint8)[..., None], 3, axis=2)
    h16 = (h * 65535).astype(np.uint16)
    r = tiny.process_frame(plate, hint, screen="green", garbage=g8, holdout=h16)
    assert_matted(r, g, h)
    want = tiny.process_frame(plate, hint, screen="green", garbage=g, holdout=h)
    np.testing.assert_array_equal(r["matte"], want["matte"])
    np.testing.assert_array_equal(r["processed"], want["processed"])


def test_mattes_are_read_in_place_at_their_strides(tiny):
    """A matte sliced from a BGRA image and a Fortran-ordered one key as their contiguous
    copies: the views' strides are read, nothing is copied or misread in the binding."""
    plate, hint = plate_and_hint()
    g, h = regions()
    bgra = np.zeros((H, W, 4), np.float32)
    bgra[..., 3] = g
    r = tiny.process_frame(plate, hint, screen="green", outputs=["matte"], garbage=bgra[..., 3],
                           holdout=np.asfortranarray(h))
    want = tiny.process_frame(plate, hint, screen="green", outputs=["matte"], garbage=g, holdout=h)
    np.testing.assert_array_equal(r["matte"], want["matte"])


def test_a_matte_of_another_size_is_refused_by_name_before_keying(ck, tiny):
    plate, hint = plate_and_hint()
    g, h = regions()
    # The `out` arrays keep their sentinel: no frame was keyed (key_frame writes them last).
    out = {"matte": np.full((H, W), -7, np.float32)}
    with pytest.raises(ck.ConfigError, match=r"^garbage: 64x47 against the plate's 64x48"):
        tiny.process_frame(plate, hint, screen="green", outputs=["matte"], out=out, garbage=g[1:])
    with pytest.raises(ck.ConfigError, match=r"^holdout: 66x48"):
        tiny.process_frame(plate, hint, screen="green", outputs=["matte"], out=out,
                           holdout=np.zeros((H, W + 2, 1), np.float32))
    with pytest.raises(ck.ConfigError, match=r"^garbage: dtype int32"):
        tiny.process_frame(plate, hint, screen="green", out=out, outputs=["matte"], garbage=g.astype(np.int32))
    assert (out["matte"] == -7).all()
    # In a batch, a matte of another frame count is refused before frame 0 is keyed.
    plates, hints = np.stack([plate, plate]), np.stack([hint, hint])
    outs = {"matte": np.full((2, H, W), -7, np.float32)}
    with pytest.raises(ck.ConfigError, match=r"^holdout: 1 frame\(s\) of 64x48 against the plate's 2 of 64x48"):
        tiny.process_frame(plates, hints, screen="green", outputs=["matte"], out=outs, holdout=h[None])
    assert (outs["matte"] == -7).all()


def test_a_batch_takes_each_frame_its_own_mattes(tiny):
    (p0, h0), (p1, h1) = plate_and_hint(0), plate_and_hint(1)
    (g0, o0), (g1, o1) = regions(), regions(flip=True)
    plates, hints = np.stack([p0, p1]), np.stack([h0, h1])
    garbage, holdout = np.stack([g0, g1]), np.stack([o0, o1])[..., None]  # BxHxW and BxHxWx1
    r = tiny.process_frame(plates, hints, screen="green", garbage=garbage, holdout=holdout)
    assert r["matte"].shape == (2, H, W) and r["processed"].shape == (2, H, W, 4)
    for i, (p, hint, g, o) in enumerate([(p0, h0, g0, o0), (p1, h1, g1, o1)]):
        assert_matted({"matte": r["matte"][i], "processed": r["processed"][i]}, g, o)
        one = tiny.process_frame(p, hint, screen="green", garbage=g, holdout=o)
        np.testing.assert_array_equal(r["matte"][i], one["matte"])


def test_the_garbage_matte_multiplies_the_hint(tiny):
    """Keyed with garbage g and holdout h = keyed from the hint x (1 - g), then the formula.
    The hint is multiplied in float32 at the plate's size before anything else touches it, so
    both calls give the model the same bits and the same raw alpha; the formula's one product
    and max are exact float32 operations on both sides. 1e-5 leaves room for a compiler's
    contraction or vector order (a few ulp at 1.0 is ~1e-7), far under any model difference."""
    plate, hint8 = plate_and_hint()
    hint = hint8.astype(np.float32) / 255
    rng = np.random.default_rng(7)
    g = rng.random((H, W), dtype=np.float32)  # soft everywhere: every pixel's hint is changed
    g[:, :8] = 1.0
    _, h = regions()
    r = tiny.process_frame(plate, hint, screen="green", outputs=["matte"], garbage=g, holdout=h)
    ref = tiny.process_frame(plate, hint * (np.float32(1) - g), screen="green", outputs=["matte"])
    want = np.maximum(ref["matte"] * (np.float32(1) - g), h)
    np.testing.assert_allclose(r["matte"], want, rtol=0, atol=1e-5)
    # And the hint matters to the model: the unmultiplied hint with the formula is another matte.
    plain = tiny.process_frame(plate, hint, screen="green", outputs=["matte"])
    assert np.abs(np.maximum(plain["matte"] * (1 - g), h) - r["matte"]).max() > 1e-3


def read_exr(path):
    """An EXR's channels by name, float32."""
    inp = oiio.ImageInput.open(str(path))
    assert inp, oiio.geterror()
    spec = inp.spec()
    px = inp.read_image(0, 0, 0, spec.nchannels, "float")
    inp.close()
    return {n: px[..., i] for i, n in enumerate(spec.channelnames)}


def test_run_inference_takes_matte_files_and_writes_them_into_layered(ck, tmp_path):
    import cv2

    clip = tmp_path / "shot"
    (clip / "Input").mkdir(parents=True)
    (clip / "AlphaHint").mkdir()
    for i in range(2):
        plate, hint = plate_and_hint(i)
        assert cv2.imwrite(str(clip / "Input" / f"frame_{i + 1:04d}.png"), plate[:, :, ::-1])
        assert cv2.imwrite(str(clip / "AlphaHint" / f"frame_{i + 1:04d}.png"), hint)
    g, h = regions()
    # One file each, for every frame: a 16-bit grey PNG garbage, a float EXR holdout.
    garbage_file = tmp_path / "garbage.png"
    assert cv2.imwrite(str(garbage_file), (g * 65535).astype(np.uint16))
    holdout_file = tmp_path / "holdout.exr"
    OpenEXR.File({"compression": OpenEXR.ZIP_COMPRESSION, "type": OpenEXR.scanlineimage},
                 {"Y": h}).write(str(holdout_file))
    out = tmp_path / "out"
    s = ck.run_inference(str(clip), output_root=str(out), checkpoint=str(TINY), device="cpu", tune="off",
                         model_precision="float32", garbage_matte=garbage_file, holdout_matte=str(holdout_file),
                         outputs=("matte", "layered"))
    assert s["frames_done"] == 2 and s["frames_failed"] == 0
    assert not (out / "shot" / "Processed").exists()  # layered alone does not write the folders
    for i in range(2):
        stem = f"frame_{i + 1:04d}"
        matte = read_exr(out / "shot" / "Matte" / f"{stem}.exr")["Y"]
        layers = read_exr(out / "shot" / "Layered" / f"{stem}.exr")
        for a in (matte, layers["matte.A"], layers["A"]):  # half float: 0 and 1 are exact
            assert (a[g == 1] == 0.0).all() and (a[h == 1] == 1.0).all()
        np.testing.assert_array_equal(layers["matte.A"], matte)
        assert (layers["R"][g == 1] == 0.0).all()  # premultiplied by alpha 0
