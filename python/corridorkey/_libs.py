"""LibTorch for the engine, wherever the torch package is.

The engine library links LibTorch; its RPATH finds the torch wheel installed beside this
package (site-packages/torch/lib), the layout pip gives. Where torch lives elsewhere (another
site-packages on sys.path, a user install), LibTorch is loaded from there before the
engine, globally, so the engine's references to it resolve to the same libraries
`import torch` uses. Nothing is loaded twice: a library already in the process (torch
imported first) is reused by its name.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os

_here = os.path.dirname(os.path.abspath(__file__))


def _preload() -> None:
    if os.path.isdir(os.path.join(_here, "..", "torch", "lib")):
        return  # the RPATH's layout: nothing to do
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("corridorkey needs the torch package (LibTorch 2.15.0): pip install torch==2.15.0")
    torch_dir = list(spec.submodule_search_locations)[0]
    lib = os.path.join(torch_dir, "lib")
    nvidia = os.path.join(os.path.dirname(torch_dir), "nvidia", "cu13", "lib")
    names = [os.path.join(nvidia, "libcudart.so.13")]
    names += [os.path.join(lib, n) for n in ("libc10.so", "libc10_cuda.so", "libtorch_cpu.so",
                                             "libtorch_cuda.so", "libtorch.so")]
    for path in names:
        if os.path.exists(path):
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)


_preload()
