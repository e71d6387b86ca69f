"""What process_frame takes: strided and typed views of one frame keyed as the frame
itself, batches as single calls, no copy in the binding, and layouts it cannot read
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


@pytest.mark.parametrize("make,words", [
    (lambda p: np.asfortranarray(p), "interleaved"),
    (lambda p: p[:, :, ::-1], "channels reversed"),
    (lambda p: p[:, ::2], "interleaved"),
])
def test_layouts_it_cannot_read_are_refused_by_name(engine, frame1, ck, make, words):
    plate, hint = frame1
    view = make(plate)
    with pytest.raises(ValueError, match=words) as e:
        engine.process_frame(view, None)
    assert isinstance(e.value, ck.ConfigError) and "plate" in str(e.value)
