"""What process_frame takes: strided and typed views of one frame (rows of a crop, channels
reversed or sliced, any signed strides) keyed as the frame itself, batches as single calls,
no copy in the binding, outputs written at their strides, and layouts no stride describes
refused with what they are."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest


def keyed(engine, plate, hint, **kw):
    return engine.process_frame(plate, hint, **kw)


def assert_same(a: dict, b: dict, atol=0.0):
    for k in ("matte", "fg", "processed", "comp"):
        if atol == 0:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)
        else:
            np.testing.assert_allclose(a[k], b[k], atol=atol, rtol=0, err_msg=k)


def test_a_row_slice_of_a_larger_array_keys_as_the_frame(engine, frame1):
    plate, hint = frame1
    big = np.zeros((plate.shape[0] + 20, plate.shape[1] + 40, 3), np.uint8)
    big[7:7 + plate.shape[0], 11:11 + plate.shape[1]] = plate
    view = big[7:7 + plate.shape[0], 11:11 + plate.shape[1]]
    assert not view.flags["C_CONTIGUOUS"]
    assert_same(keyed(engine, view, hint), keyed(engine, plate, hint))


def test_rgba_keys_as_rgb(engine, frame1):
    plate, hint = frame1
    alpha = np.random.default_rng(1).integers(0, 256, plate.shape[:2], dtype=np.uint8)
    assert_same(keyed(engine, np.dstack([plate, alpha]), hint), keyed(engine, plate, hint))


def test_uint16_and_float_plates_key_as_the_same_levels(engine_f32, frame1):
    # Pinned to float32: this bounds how levels are read, not the model. Under bfloat16 one
    # rounding of the input moved the matte by up to 5.9e-3 (a Zen 4, issue 46).
    engine = engine_f32
    plate, hint = frame1
    base = keyed(engine, plate, hint)
    # uint16 at the same levels (x * 257 / 65535 == x / 255) and float32 x / 255: the same
    # input to the engine within one rounding, the same matte within float32 noise.
    assert_same(keyed(engine, plate.astype(np.uint16) * 257, hint), base, atol=2e-5)
    assert_same(keyed(engine, plate.astype(np.float32) / 255, hint), base, atol=2e-5)
    # float16 rounds the levels (3 decimal digits): close, not equal.
    f16 = keyed(engine, (plate.astype(np.float32) / 255).astype(np.float16), hint)
    assert np.abs(f16["matte"] - base["matte"]).max() < 0.02


def test_a_grey_plate_keys(engine, frame1):
    plate, hint = frame1
    grey = plate.mean(axis=2).astype(np.uint8)
    r = engine.process_frame(np.dstack([grey] * 3), hint, screen="green")
    for g in (grey, grey[:, :, None]):
        np.testing.assert_array_equal(engine.process_frame(g, hint, screen="green")["matte"], r["matte"])


def test_a_batch_keys_each_frame_as_a_single_call(engine, frame1):
    plate, hint = frame1
    rng = np.random.default_rng(2)
    plates = np.stack([plate, np.roll(plate, 5, axis=1), np.clip(plate.astype(int) + rng.integers(-3, 4, plate.shape), 0, 255).astype(np.uint8)])
    hints = np.stack([hint] * 3)
    batch = engine.process_frame(plates, hints)
    assert batch["matte"].shape == (3,) + plate.shape[:2]
    assert batch["comp"].shape == (3,) + plate.shape
    for i in range(3):
        one = engine.process_frame(plates[i], hints[i])
        for k in ("matte", "fg", "processed", "comp"):
            np.testing.assert_array_equal(batch[k][i], one[k], err_msg=f"{k}[{i}]")


def test_out_arrays_are_written_in_place(engine, frame1):
    plate, hint = frame1
    h, w = plate.shape[:2]
    matte = np.full((h, w), -1, np.float32)
    comp = np.zeros((h, w, 3), np.float16)
    r = engine.process_frame(plate, hint, outputs=("matte", "comp"), out={"matte": matte, "comp": comp})
    assert r["matte"] is matte and r["comp"] is comp
    ref = engine.process_frame(plate, hint, outputs=("matte", "comp"))
    np.testing.assert_array_equal(matte, ref["matte"])
    np.testing.assert_array_equal(comp, ref["comp"].astype(np.float16))
    assert set(ref) >= {"matte", "comp"} and "fg" not in ref


def test_no_copy_of_the_plate_in_the_binding(engine, frame1):
    """numpy reports its allocations to tracemalloc; the engine's own (C++) do not. A binding
    that copied the plate (ascontiguousarray, a cast) would show one plate of allocation."""
    plate, hint = frame1
    big = np.ascontiguousarray(np.tile(plate, (4, 4, 1)))[:, :-3]  # a strided view, 2.7 MB
    bighint = np.ascontiguousarray(np.tile(hint, (4, 4)))[:, :-3]
    engine.process_frame(big, bighint)  # warm
    tracemalloc.start()
    engine.process_frame(big, bighint)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < big.nbytes / 4, f"{peak} bytes allocated through Python for a {big.nbytes}-byte plate"


def test_reversed_and_sliced_channels_key_as_their_contiguous_copy(engine, frame1):
    """OpenCV's BGR-to-RGB step ([..., ::-1]) and channel slices are read in place, at their
    strides, and key bit-identically to the same pixels made contiguous."""
    plate, hint = frame1
    base = keyed(engine, plate, hint)
    bgr = np.ascontiguousarray(plate[..., ::-1])  # as cv2.imread gives it
    rgb = bgr[..., ::-1]
    assert rgb.strides[2] == -1 and not rgb.flags["C_CONTIGUOUS"]
    assert_same(keyed(engine, rgb, hint), keyed(engine, np.ascontiguousarray(rgb), hint))
    assert_same(keyed(engine, rgb, hint), base)
    alpha = np.random.default_rng(3).integers(0, 256, plate.shape[:2], dtype=np.uint8)
    rgba = np.dstack([plate, alpha])
    assert_same(keyed(engine, rgba[..., :3], hint), keyed(engine, np.ascontiguousarray(rgba[..., :3]), hint))
    six = np.dstack([alpha, plate, alpha, alpha]).astype(np.float32) / 255  # 6 channels, RGB at 1:4
    sliced = six[..., 1:4]
    assert sliced.strides == (six.strides[0], 24, 4)
    hint3 = np.dstack([hint] * 3)[..., 1:2]  # a channel of a 3-channel hint: pixel stride 3
    assert_same(keyed(engine, sliced, hint3), keyed(engine, np.ascontiguousarray(sliced), np.ascontiguousarray(hint3)))


@pytest.mark.parametrize("make", [
    pytest.param(lambda p: np.asfortranarray(p), id="fortran"),
    pytest.param(lambda p: p[:, ::2], id="every-other-pixel"),
    pytest.param(lambda p: p[::-1, ::-1], id="rotated-180"),
    pytest.param(lambda p: np.ascontiguousarray(p.transpose(1, 0, 2)).transpose(1, 0, 2), id="transposed"),
])
def test_any_strides_key_as_their_contiguous_copy(engine, frame1, make):
    plate, hint = frame1
    view, hview = make(plate), make(hint[:, :, None])[:, :, 0]
    assert not view.flags["C_CONTIGUOUS"]
    assert_same(keyed(engine, view, hview, screen="green"),
                keyed(engine, np.ascontiguousarray(view), np.ascontiguousarray(hview), screen="green"))


def test_strided_out_arrays_are_written_at_their_strides(engine, frame1):
    plate, hint = frame1
    h, w = plate.shape[:2]
    bgra = np.full((h, w, 4), -7, np.float32)  # comp written as BGR, matte as its alpha
    fg = np.asfortranarray(np.zeros((h, w, 3), np.float16))
    r = engine.process_frame(plate, hint, outputs=("matte", "fg", "comp"),
                             out={"comp": bgra[..., 2::-1], "matte": bgra[..., 3], "fg": fg})
    ref = engine.process_frame(plate, hint, outputs=("matte", "fg", "comp"))
    np.testing.assert_array_equal(bgra[..., 2::-1], ref["comp"])
    np.testing.assert_array_equal(bgra[..., 3], ref["matte"])
    np.testing.assert_array_equal(fg, ref["fg"].astype(np.float16))
    assert r["fg"] is fg


def _overlapping_rows(a):
    # Each row starting half a row after the last: rows share memory.
    return np.lib.stride_tricks.as_strided(a, a.shape, (a.strides[0] // 2,) + a.strides[1:])


@pytest.mark.parametrize("make,words", [
    (lambda p: np.broadcast_to(p[:, :1], p.shape), "samples overlap"),  # every pixel the same bytes
    (lambda p: np.broadcast_to(p[..., :1], p.shape), "samples overlap"),  # every channel the same
    (_overlapping_rows, "samples overlap"),
])
def test_layouts_no_stride_can_describe_are_refused_by_name(engine, frame1, ck, make, words):
    plate, hint = frame1
    view = make(plate)
    with pytest.raises(ValueError, match=words) as e:
        engine.process_frame(view, None)
    assert isinstance(e.value, ck.ConfigError) and "plate" in str(e.value)
    h, w = plate.shape[:2]
    matte = _overlapping_rows(np.zeros((h, w), np.float32))
    with pytest.raises(ck.ConfigError, match=r"out\['matte'\]: samples overlap"):
        engine.process_frame(plate, hint, outputs=("matte",), out={"matte": matte})
