"""Bad input gets the engine's typed errors with what is wrong named; a hostile checkpoint
runs nothing; a tensor on a GPU is refused, not read."""

from __future__ import annotations

import ctypes
import os

import numpy as np
import pytest


def test_error_classes_are_python_ones(ck):
    assert issubclass(ck.ConfigError, ck.Error) and issubclass(ck.ConfigError, ValueError)
    assert issubclass(ck.IoError, ck.Error) and issubclass(ck.IoError, OSError)
    assert issubclass(ck.ModelError, ck.Error) and issubclass(ck.DeviceError, ck.Error)


@pytest.mark.parametrize("plate,what", [
    (np.zeros((180, 320, 2), np.uint8), "2 channel"),
    (np.zeros((180, 320, 3), np.int32), "dtype"),
    (np.zeros((180, 320, 3), np.float64), "float64"),
    (np.zeros((2, 3, 180, 320, 3), np.uint8), "dimensions"),
    (np.zeros((0, 320, 3), np.uint8), "empty"),
])
def test_bad_plates_name_the_argument(engine, ck, plate, what):
    with pytest.raises(ValueError, match=what) as e:
        engine.process_frame(plate)
    assert isinstance(e.value, ck.ConfigError) and str(e.value).startswith("plate")


def test_a_hint_of_another_size_is_refused(engine, frame1, ck):
    plate, hint = frame1
    with pytest.raises(ck.ConfigError, match="hint.*against the plate"):
        engine.process_frame(plate, hint[:-1])


def test_bad_keywords_are_refused(engine, model, frame1, ck):
    plate, hint = frame1
    with pytest.raises(ck.ConfigError, match="screen"):
        engine.process_frame(plate, hint, screen="purple")
    with pytest.raises(ck.ConfigError, match="outputs"):
        engine.process_frame(plate, hint, outputs=("alpha",))
    with pytest.raises(ck.ConfigError, match="despill"):
        model.engine(despill=11)
    with pytest.raises(ck.ConfigError, match="no_such_key"):
        model.engine(no_such_key=1)
    with pytest.raises(ck.ConfigError, match="Model option"):
        model.engine(model_precision="float32")
    with pytest.raises(ck.ConfigError, match="out\\['matte'\\]"):
        engine.process_frame(plate, hint, out={"matte": np.zeros((10, 10), np.float32)})
    with pytest.raises(ck.ConfigError, match="float16 or float32"):
        engine.process_frame(plate, hint, out={"matte": np.zeros(plate.shape[:2], np.uint8)})


def test_a_missing_checkpoint_is_an_io_error(ck, tmp_path):
    with pytest.raises(ck.IoError) as e:
        ck.Model.load(str(tmp_path / "nope.safetensors"), tune="off")
    assert isinstance(e.value, OSError) and "nope.safetensors" in str(e.value)


class Evil:
    def __reduce__(self):
        return (os.system, ("touch " + os.environ["CK_EVIL_MARKER"],))


def test_a_pickle_with_reduce_is_a_model_error_and_runs_nothing(ck, tmp_path, monkeypatch):
    import torch

    marker = tmp_path / "executed"
    monkeypatch.setenv("CK_EVIL_MARKER", str(marker))
    path = tmp_path / "evil.pth"
    torch.save({"state_dict": {"x": torch.zeros(2)}, "evil": Evil()}, path)
    with pytest.raises(ck.ModelError):
        ck.Model.load(str(path), tune="off")
    assert not marker.exists(), "the checkpoint's pickle ran a command"
    # The same file through Python's own unpickler does run it: the payload is live.
    torch.load(path, weights_only=False)
    assert marker.exists()


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class CudaTensor:
    """A DLPack producer that says its data is on CUDA device 0, as a torch CUDA tensor's
    __dlpack__ does (no GPU here: the pointer is never read, which is the point)."""

    def __init__(self, h, w, c):
        self.host = np.zeros((h, w, c), np.float32)
        self.shape = (ctypes.c_int64 * 3)(h, w, c)
        self.m = _DLManagedTensor()
        t = self.m.dl_tensor
        t.data = self.host.ctypes.data
        t.device = _DLDevice(2, 0)  # kDLCUDA
        t.ndim = 3
        t.dtype = _DLDataType(2, 32, 1)  # float32
        t.shape = self.shape
        t.strides = None

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None, **kwargs):
        capsule_new = ctypes.pythonapi.PyCapsule_New
        capsule_new.restype = ctypes.py_object
        capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return capsule_new(ctypes.addressof(self.m), b"dltensor", None)


def test_a_cuda_tensor_is_refused_with_a_message(engine, ck):
    with pytest.raises(Exception) as e:
        engine.process_frame(CudaTensor(180, 320, 3))
    assert "CUDA" in str(e.value) and ("host memory" in str(e.value) or "cpu" in str(e.value).lower()), str(e.value)


def test_arguments_that_once_crashed_or_misled_are_refused_by_name(ck, engine, frame1, tmp_path):
    plate, hint = frame1
    huge = np.lib.stride_tricks.as_strided(np.zeros(3, np.uint8), (1, 2**32 + 64, 3), (0, 0, 1))
    with pytest.raises(ck.ConfigError, match="more than a frame may hold"):
        engine.process_frame(huge, screen="green")
    loop = []
    loop.append(loop)
    with pytest.raises(ck.ConfigError, match="threads: a nested list"):
        ck.Model.load(tune="off", threads=loop)
    with pytest.raises(ck.ConfigError, match="empty path"):
        ck.Model.load("")
    with pytest.raises(ck.ConfigError, match="NUL"):
        ck.Model.load(ck.info()["default_checkpoint"] + "\0x")
    with pytest.raises(ck.ConfigError, match="img_size"):
        ck.Model.load(tune="off", img_size=-1)
    batch = np.stack([plate, plate]).astype(np.float32)
    overlapping = np.lib.stride_tricks.as_strided(np.zeros(plate.size + 20000, np.float32), (2,) + plate.shape,
                                                  (80000, plate.shape[1] * 12, 12, 4))
    with pytest.raises(ck.ConfigError, match="frames overlap"):
        engine.process_frame(batch, outputs=("fg",), out={"fg": overlapping}, screen="green")
    read_only = np.zeros(plate.shape[:2], np.float32)
    read_only.flags.writeable = False
    with pytest.raises(ck.ConfigError, match="writable"):
        engine.process_frame(plate, hint, out={"matte": read_only})
    with pytest.raises(ck.ConfigError, match="dtype int32"):
        engine.process_frame(plate.astype(np.int32))
    with pytest.raises(ck.ConfigError, match="input_colorspace"):
        engine.process_frame(plate, hint, input_colorspace="auto")
    with pytest.raises(TypeError):
        ck.set_log_handler(5)


def test_paths_of_every_kind_and_a_one_pixel_wide_plate(ck, engine, frame1):
    import pathlib

    plate, hint = frame1
    path = ck.info()["default_checkpoint"]
    for p in (pathlib.Path(path), path.encode()):
        assert ck.Model.load(p, tune="off").arch == "small"
    column = np.ascontiguousarray(plate[:, :1])  # numpy gives the length-1 axis any stride
    assert engine.process_frame(column, hint[:, :1], screen="green")["matte"].shape == (plate.shape[0], 1)
