"""Type stubs of corridorkey (docs/python.md)."""

from collections.abc import Buffer, Callable, Iterable, Sequence
from os import PathLike
from typing import Any, Literal, TypedDict

import numpy as np
import numpy.typing as npt

__version__: str

class Error(Exception): ...
class ConfigError(Error, ValueError): ...
class IoError(Error, OSError): ...
class ModelError(Error): ...
class DeviceError(Error): ...

# A path as os.fsencode takes it: the bytes reach the filesystem as given (a str made by
# os.fsdecode from a non-UTF-8 name gives its bytes back).
StrPath = str | bytes | PathLike[str] | PathLike[bytes]

OutputName = Literal["matte", "fg", "processed", "comp"]
Screen = Literal["auto", "green", "blue"]

class FrameTimings(TypedDict):
    preprocess_ms: float
    infer_ms: float
    postprocess_ms: float
    total_ms: float
    call_ms: float

class Model:
    """Loaded weights that engines share (one copy in memory)."""

    @staticmethod
    def load(
        checkpoint: StrPath | None = None,
        *,
        profile: StrPath = "optimized",
        device: str = "auto",
        img_size: int = 0,
        **model_overrides: Any,
    ) -> Model: ...
    def engine(self, **engine_overrides: Any) -> Engine: ...
    @property
    def checkpoint(self) -> str: ...
    @property
    def arch(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def img_size(self) -> int: ...
    @property
    def parameters(self) -> int: ...

class Engine:
    """Keys frames on a Model's weights; calls on one engine are serialised."""

    def info(self) -> dict[str, Any]: ...
    def process_frame(
        self,
        plate: npt.NDArray[Any] | Buffer,
        hint: npt.NDArray[Any] | Buffer | None = None,
        *,
        screen: Screen = "auto",
        input_colorspace: str = "srgb",
        outputs: Sequence[OutputName] = ("matte", "fg", "processed", "comp"),
        out: dict[OutputName, npt.NDArray[np.float16] | npt.NDArray[np.float32]] | None = None,
        output_colorspace: str | None = None,
        fg_colorspace: str | None = None,
        comp_view: str | None = None,
        garbage: npt.NDArray[Any] | Buffer | None = None,
        holdout: npt.NDArray[Any] | Buffer | None = None,
    ) -> dict[str, Any]:
        """Keys a frame (HxWxC, HxW grey) or a batch (BxHxWxC). Returns the outputs asked for
        as float32 arrays (or the `out` arrays, written in place) and 'screen', 'swapped',
        'linear', 'checkpoint', 'warnings', 'timings' (FrameTimings). output_colorspace,
        fg_colorspace and comp_view (None: unconverted) put processed, fg and comp in those
        spaces as `inference`'s flags of the same names write them. garbage and holdout:
        plate-sized mattes (as a hint is given; white marks the region): the matte is exactly 0
        under the garbage matte and exactly 1 under the holdout."""

def run_inference(
    clips: StrPath | Iterable[StrPath],
    *,
    profile: StrPath = "optimized",
    on_event: Callable[[dict[str, Any]], None] | None = None,
    **overrides: Any,
) -> dict[str, Any]: ...
def info() -> dict[str, Any]: ...
def set_log_handler(handler: Callable[[int, str], None] | None) -> None: ...
