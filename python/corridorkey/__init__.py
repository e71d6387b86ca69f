"""CorridorKey Engine: neural green-screen keying (GreenFormer on LibTorch), in-process.

    import corridorkey
    model = corridorkey.Model.load("/models/CorridorKey.safetensors", img_size=2048)
    engine = model.engine(despill=5)
    out = engine.process_frame(plate)          # HxWx3 uint8/uint16/float16/float32
    matte, comp = out["matte"], out["comp"]   # float32 arrays

    corridorkey.run_inference(["/shots/sh010"], profile="optimized", img_size=2048)

The engine's C++ API (libcorridorkey_engine.so) through nanobind: no Python runs while a
frame is keyed, the GIL is released, and arrays pass without a copy. docs/python.md.
"""

from . import _libs  # noqa: F401  (LibTorch located before the engine loads)
from ._corridorkey import (  # noqa: F401
    ConfigError,
    DeviceError,
    Engine,
    Error,
    IoError,
    Model,
    ModelError,
    __version__,
    info,
    run_inference,
)
from ._logging import set_log_handler  # noqa: F401

__all__ = [
    "ConfigError",
    "DeviceError",
    "Engine",
    "Error",
    "IoError",
    "Model",
    "ModelError",
    "__version__",
    "info",
    "run_inference",
    "set_log_handler",
]
