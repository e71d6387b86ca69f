#!/usr/bin/env python3
"""Generate the model test fixtures into a build folder (run by ctest as a fixture setup).

Everything is seeded (tools/export_torchscript.py), so the files are identical on every run;
a stamp with the command list skips regeneration when nothing changed. The full
hiera_base_plus archive at 256 is ~285 MB, which is why fixtures are generated, not committed.

Checkpoints are written the way users' tools write them (torch.save of a state_dict, a
training checkpoint with optimizer state, torch.compile's state_dict, bf16, the legacy
format, pickle protocols 4 and 5, EMA-only), all from seed 0 so every one must load to the
parameters of tiny128.ts. The hostile files (a pickle that calls os.system, a TorchScript
module whose __setstate__ writes a file) are made here too, and proven to be real: Python's
own loader runs their payload where the engine must not.

  python tests/make_fixtures.py --out build/tests/fixtures [--no-full]
"""
import argparse
import collections
import hashlib
import os
import sys
import time
import warnings
from typing import Tuple

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import export_torchscript as ex  # noqa: E402


def jobs(out, full):
    j = lambda *a: [str(x) for x in a]  # noqa: E731
    tiny0 = ("--arch", "tiny", "--img-size", 128, "--seed", 0)
    # tiny128.pth is a training checkpoint: {"state_dict", "optimizer" (AdamW after a step),
    # "epoch", "config"}, like CorridorKey.pth and most training scripts write.
    yield j(*tiny0, "--output", f"{out}/tiny128.ts", "--fixture", f"{out}/tiny128_fixture.pt",
            "--write-pth", f"{out}/tiny128.pth", "--pth-layout", "training")
    # The same weights in every other shape a user may hand us.
    yield j(*tiny0, "--write-pth", f"{out}/tiny128_top.pth", "--pth-layout", "top")
    yield j(*tiny0, "--write-pth", f"{out}/tiny128_compiled.pth", "--pth-layout", "compiled")
    yield j(*tiny0, "--write-pth", f"{out}/tiny128_bf16.pth", "--pth-layout", "top",
            "--pth-dtype", "bfloat16")
    yield j(*tiny0, "--write-pth", f"{out}/tiny128_legacy.pth", "--pth-layout", "training",
            "--pth-legacy")
    yield j(*tiny0, "--write-pth", f"{out}/tiny128_ema.pth", "--pth-layout", "ema")
    yield j(*tiny0, "--write-pth", f"{out}/tiny128_p4.pth", "--pth-layout", "training",
            "--pth-protocol", 4)
    yield j(*tiny0, "--write-pth", f"{out}/tiny128_p5.pth", "--pth-layout", "compiled",
            "--pth-protocol", 5)
    # Decoupled sizes: the same weights with the encoder at 64 (pos_embed resized by the
    # reference loader), the refiner at 128, as the reference's GreenFormer(backbone_size=64).
    yield j("--arch", "tiny", "--img-size", 128, "--backbone-size", 64, "--seed", 0,
            "--checkpoint", f"{out}/tiny128.pth", "--fixture", f"{out}/tiny128_bb64_fixture.pt")
    # The reference's own output convention, {"alpha", "fg"}: verify must accept it.
    yield j(*tiny0, "--output", f"{out}/tiny128_dict.ts", "--ts-outputs", "dict")
    # Trained at 256, used at 128: pos_embed must be resized like the reference does.
    yield j("--arch", "tiny", "--img-size", 256, "--seed", 3,
            "--write-pth", f"{out}/tiny256.pth", "--output", f"{out}/tiny256.ts")
    yield j("--arch", "tiny", "--img-size", 128, "--seed", 3,
            "--output", f"{out}/tiny256_at128.ts", "--checkpoint", f"{out}/tiny256.pth")
    yield j("--arch", "tiny", "--img-size", 128, "--seed", 5,
            "--pos-embed-fixture", f"{out}/pos_embed_64_to_40.pt",
            "--pos-embed-from", 64, "--pos-embed-to", 40)
    if full:
        yield j("--arch", "hiera_base_plus", "--img-size", 256, "--seed", 0,
                "--output", f"{out}/base_plus256.ts", "--fixture", f"{out}/base_plus256_fixture.pt")


def tiny_model():
    model = ex.gr.build_greenformer("tiny", 128)
    ex.gr.randomize_(model, 0)
    return model.float().eval()


def flat_state_dict(sd):
    """Every float tensor a view into ONE storage at its own offset (what flat-parameter
    training wrappers save); 2-D weights are stored transposed, so their views are not
    contiguous."""
    floats = [v for v in sd.values() if v.dtype == torch.float32]
    flat = torch.zeros(sum(v.numel() for v in floats) + 7)
    out, off = collections.OrderedDict(), 3
    for k, v in sd.items():
        if v.dtype != torch.float32:
            out[k] = v
            continue
        n = v.numel()
        chunk = flat[off:off + n]
        if v.dim() == 2:
            chunk.view(v.shape[1], v.shape[0]).copy_(v.t())
            out[k] = chunk.view(v.shape[1], v.shape[0]).t()
        else:
            chunk.view(v.shape).copy_(v)
            out[k] = chunk.view(v.shape)
        off += n
    return out


DTYPES = ("float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "int32",
          "int64", "bool", "complex64", "complex128")
NEW_DTYPES = ("uint16", "uint32", "uint64", "float8_e4m3fn")  # _rebuild_tensor_v3


def dtype_dict(new_dtypes):
    """For each dtype: t = the 4x6 pattern (arange; bool: odd; complex: a - ai), its
    transpose and a slice at an offset, both views of t's storage; plus tied entries (one
    tensor under two keys), a Parameter, an empty tensor and a 0-d tensor."""
    base = torch.arange(24, dtype=torch.float64).reshape(4, 6)
    d = collections.OrderedDict()
    for name in DTYPES + (NEW_DTYPES if new_dtypes else ()):
        dt = getattr(torch, name)
        if dt == torch.bool:
            t = (base % 2) == 1
        elif dt.is_complex:
            t = torch.complex(base, -base).to(dt)
        else:
            t = base.to(dt)
        d[name], d[name + "_t"], d[name + "_slice"] = t, t.t(), t[1:3, 2:5]
    w = torch.linspace(-1.0, 1.0, 5)
    d["tied_a"], d["tied_b"] = w, w
    d["param"] = torch.nn.Parameter(torch.full((2, 2), 0.5))
    d["empty"] = torch.empty(0, 5)
    d["scalar"] = torch.tensor(3.5)
    return d


class SystemCall:
    """Unpickling this runs `touch marker` in any loader that calls what the pickle names."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class EvalCall(SystemCall):
    def __reduce__(self):
        import builtins
        return (builtins.eval, (f"open({self.marker!r}, 'w').close()",))


class ArmedSetstate(torch.nn.Module):
    """A scripted submodule whose __setstate__ (run by torch.jit.load) writes a file."""

    def __init__(self, marker: str):
        super().__init__()
        self.marker = marker

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x

    @torch.jit.export
    def __getstate__(self) -> Tuple[str, bool]:
        return (self.marker, self.training)

    @torch.jit.export
    def __setstate__(self, state: Tuple[str, bool]) -> None:
        self.training = state[1]
        # The result is used, so TorchScript keeps the call: from_file(shared=True)
        # creates the file.
        self.marker = state[0] + str(torch.from_file(state[0], True, 1).numel())


def require(cond, msg):
    if not cond:
        raise RuntimeError(f"fixture is not what the test needs: {msg}")


def write_special(out):
    """Fixtures that are not a model export: flat / view / dtype files, hostile files."""
    warnings.filterwarnings("ignore", category=FutureWarning, message=r".*torch\.jit\.")
    torch.set_grad_enabled(False)
    model = tiny_model()
    torch.save(flat_state_dict(model.state_dict()), f"{out}/tiny128_flat.pth")
    torch.save(dtype_dict(True), f"{out}/dtypes.pth")
    torch.save(dtype_dict(True), f"{out}/dtypes_p5.pth", pickle_protocol=5)
    # torch cannot read its own legacy files with the v3 dtypes back, so neither do we.
    torch.save(dtype_dict(False), f"{out}/dtypes_legacy.pth", _use_new_zipfile_serialization=False)

    # Every protocol-2 checkpoint fixture is within what torch.load(weights_only=True)
    # accepts (its unpickler has no FRAME opcode, so protocols 4/5 need the full one).
    for name in sorted(os.listdir(out)):
        if name.endswith((".pth", ".pt")) and not name.startswith("evil"):
            high = "_p4" in name or "_p5" in name
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.load(f"{out}/{name}", weights_only=not high)

    # Hostile pickles: the markers must never exist; Python's full unpickler would make them.
    for name, cls, proto in (("evil_system.pth", SystemCall, 2), ("evil_eval.pth", EvalCall, 4)):
        marker = f"{out}/{name}.marker"
        if os.path.exists(marker):
            os.remove(marker)
        torch.save({"state_dict": model.state_dict(), "payload": cls(marker)}, f"{out}/{name}",
                   pickle_protocol=proto)
        require(not os.path.exists(marker), f"saving {name} ran its payload")

    # A TorchScript GreenFormer with an armed submodule: torch.jit.load writes the marker.
    marker = f"{out}/tiny128_armed.marker"
    model.armed = torch.jit.script(ArmedSetstate(marker))
    x = ex.make_input(128, ex.INPUT_SEED_OFFSET)
    traced = torch.jit.trace(model, (x,), strict=False, check_trace=False)
    armed = f"{out}/tiny128_armed.ts"
    torch.jit.save(traced, armed, _extra_files={"config.json": ex.config_json("tiny", 128)})
    if os.path.exists(marker):
        os.remove(marker)
    torch.jit.load(armed)
    require(os.path.exists(marker), "torch.jit.load of tiny128_armed.ts did not run __setstate__")
    os.remove(marker)
    print(f"wrote flat/dtype/hostile fixtures to {out} (torch.jit.load of the armed archive "
          f"did write its marker; removed)")


def write_safetensors(out):
    """safetensors files as users have them: written by the safetensors package itself
    (safetensors.torch.save_file, as the reference's hosted weights are), from the same
    seed-0 state dict as tiny128*.pth, in fp32 / fp16 / bf16, with and without torch.compile's
    _orig_mod. prefix, each beside a torch.save twin of the same weights. A second model
    (seed 1) stands in for the blue-screen model; a dtype file covers every dtype the
    engine reads, and one the engine refuses (U16)."""
    from safetensors.torch import save_file
    torch.set_grad_enabled(False)
    sd = tiny_model().state_dict()  # includes BatchNorm num_batches_tracked (int64)
    save_file(dict(sd), f"{out}/tiny128.safetensors")
    save_file({"_orig_mod." + k: v for k, v in sd.items()}, f"{out}/tiny128_compiled.safetensors")
    for name, dt in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        half = collections.OrderedDict(
            (k, v.to(dt) if v.is_floating_point() else v) for k, v in sd.items())
        save_file(dict(half), f"{out}/tiny128_{name}.safetensors")
        torch.save(half, f"{out}/tiny128_{name}_twin.pth")
    blue = ex.gr.build_greenformer("tiny", 128)
    ex.gr.randomize_(blue, 1)
    blue_sd = blue.float().eval().state_dict()
    save_file(dict(blue_sd), f"{out}/tiny128_seed1.safetensors")
    torch.save(blue_sd, f"{out}/tiny128_seed1.pth")

    base = torch.arange(24, dtype=torch.float64).reshape(4, 6)
    d = {}
    for name in ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16",
                 "int8", "uint8", "float8_e4m3fn", "float8_e5m2"):
        d[name] = base.to(getattr(torch, name))
    d["bool"] = (base % 2) == 1
    d["empty"] = torch.empty(0, 5)
    d["scalar"] = torch.tensor(3.5)
    save_file(d, f"{out}/dtypes.safetensors", metadata={"note": "every dtype the engine reads"})
    save_file({"weight": base.to(torch.uint16)}, f"{out}/dtype_u16.safetensors")
    # A file whose metadata names an architecture the shapes contradict (embed_dim 32).
    cfg = __import__("json").loads(ex.config_json("tiny", 128))
    cfg["embed_dim"] = 32
    save_file(dict(sd), f"{out}/tiny128_badmeta.safetensors",
              metadata={"corridorkey_config": __import__("json").dumps(cfg)})
    print(f"wrote safetensors fixtures to {out}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--no-full", action="store_true", help="skip the 285 MB hiera_base_plus archive")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    todo = list(jobs(a.out, not a.no_full))
    sources = b"".join(open(f, "rb").read() for f in (
        os.path.join(HERE, "..", "tools", "export_torchscript.py"),
        os.path.join(HERE, "..", "tools", "greenformer_ref.py"), os.path.abspath(__file__)))
    digest = hashlib.sha256(repr(todo).encode() + sources).hexdigest()
    stamp = os.path.join(a.out, "stamp.txt")
    if os.path.exists(stamp) and open(stamp).read() == digest:
        print(f"fixtures up to date in {a.out}")
        return 0
    t0 = time.time()
    for argv in todo:
        rc = ex.main(argv)
        if rc:
            print(f"fixture generation failed: {' '.join(argv)}", file=sys.stderr)
            return rc
    write_special(a.out)
    write_safetensors(a.out)
    open(stamp, "w").write(digest)
    print(f"fixtures written to {a.out} in {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
