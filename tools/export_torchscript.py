#!/usr/bin/env python3
"""Export the reference GreenFormer to TorchScript, plus seeded test fixtures.

Everything is seeded: the same command line writes the same tensors.

  python tools/export_torchscript.py --arch tiny --img-size 128 \
      --output /tmp/tiny128.ts --fixture /tmp/tiny128_fixture.pt --write-pth /tmp/tiny128.pth

Files:
  --output F      torch.jit.trace of the model at img_size (batch 1, float32, CPU, eval,
                  refiner_scale 1.0 baked in); _extra_files["config.json"] holds the config.
  --fixture F     {"input": x, "c1": ..., "fg": ...}: eager outputs for a seeded input.
  --write-pth F   the same weights, written the way training code writes them (torch.save of
                  model.state_dict(), a training checkpoint, torch.compile's state_dict, bf16,
                  the legacy format, ...; see --pth-layout, --pth-dtype, --pth-legacy).
  --pos-embed-fixture F   {"src": [1,G1^2,C], "dst": [1,G2^2,C]} for the resize test.

State dicts are saved as they come (OrderedDict with _metadata, tensors as the model holds
them); the C++ side reads torch.save files with its own restricted unpickler.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
import copy
from typing import Any, Dict

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import greenformer_ref as gr  # noqa: E402

FORMAT_VERSION = 1
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# Offsets keep the input / pos_embed streams independent of the weight stream for one --seed.
INPUT_SEED_OFFSET = 1_000_003
POS_EMBED_SEED_OFFSET = 2_000_003


def config_json(arch: str, img_size: int) -> str:
    cfg = gr.resolve_config(arch)
    doc = {k: cfg[k] for k in gr.CONFIG_KEYS}
    doc.update({"arch": arch, "img_size": img_size, "format_version": FORMAT_VERSION})
    return json.dumps(doc, indent=2, sort_keys=False)


def make_input(img_size: int, seed: int) -> torch.Tensor:
    """[1, 4, S, S]: ImageNet-normalised uniform-noise rgb + a smooth hint blob in 0..1
    (a disc of seeded centre / radius, Gaussian-blurred so it has soft edges)."""
    g = torch.Generator().manual_seed(seed)
    s = img_size
    rgb = torch.rand(1, 3, s, s, generator=g)
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    rgb = (rgb - mean) / std

    cy, cx = (0.35 + 0.3 * torch.rand(2, generator=g)) * s
    radius = (0.2 + 0.1 * torch.rand(1, generator=g).item()) * s
    yy = torch.arange(s, dtype=torch.float32).view(s, 1)
    xx = torch.arange(s, dtype=torch.float32).view(1, s)
    disc = (((yy - cy) ** 2 + (xx - cx) ** 2) <= radius ** 2).float().view(1, 1, s, s)
    sigma = s / 32.0
    half = int(3 * sigma)
    t = torch.arange(-half, half + 1, dtype=torch.float32)
    k = torch.exp(-0.5 * (t / sigma) ** 2)
    k = k / k.sum()
    hint = F.conv2d(F.pad(disc, (half, half, 0, 0), mode="replicate"), k.view(1, 1, 1, -1))
    hint = F.conv2d(F.pad(hint, (0, 0, half, half), mode="replicate"), k.view(1, 1, -1, 1))
    hint = hint.clamp(0.0, 1.0)
    return torch.cat([rgb, hint], dim=1).contiguous()


class _DictOutputs(gr.GreenFormer):
    """The reference with CorridorKey's own output convention: {"alpha", "fg"} (what
    `verify` must accept besides our 13-tuple). A subclass, so parameter names are unchanged."""

    def forward(self, x: torch.Tensor, refiner_scale: float = 1.0) -> Dict[str, torch.Tensor]:
        out = super().forward(x, refiner_scale)
        return {"alpha": out[11], "fg": out[12]}


def training_checkpoint(model: torch.nn.Module, arch: str, img_size: int) -> Dict[str, Any]:
    """What a training loop saves: weights, a real AdamW state after one step (on a copy, so
    the exported weights are untouched), the epoch and a config with assorted Python values."""
    shadow = copy.deepcopy(model).train()
    opt = torch.optim.AdamW(shadow.parameters(), lr=1e-4)
    with torch.enable_grad():
        loss = sum((p.float() ** 2).mean() for p in shadow.parameters())
        loss.backward()
    opt.step()
    return {
        "state_dict": model.state_dict(),
        "optimizer": opt.state_dict(),
        "epoch": 7,
        "config": {"arch": arch, "img_size": img_size, "lr": 1e-4, "betas": (0.9, 0.999),
                   "input_shape": torch.Size([1, 4, img_size, img_size]),
                   "device": torch.device("cpu"), "dtype": torch.float32,
                   "seed": 2 ** 70, "tag": b"\x00\xffraw", "note": None,
                   "name": "gr\u00fcn \u03c8", "flags": {1, 2}, "milestones": [10, 20]},
    }


def checkpoint_object(model: torch.nn.Module, layout: str, arch: str, img_size: int) -> Any:
    sd = model.state_dict()
    if layout == "state_dict":
        return {"state_dict": sd}
    if layout == "top":
        return sd
    if layout == "compiled":
        # torch.compile wraps the model as _orig_mod; no compilation happens until a forward.
        return torch.compile(model).state_dict()
    if layout == "ema":
        return {"model_ema": sd}
    if layout == "training":
        return training_checkpoint(model, arch, img_size)
    raise ValueError(f"unknown --pth-layout {layout}")


def human_size(path: str) -> str:
    n = os.path.getsize(path)
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.1f} kB"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Export the reference GreenFormer (timm Hiera) to TorchScript and write "
                    "seeded fixtures for the C++ parity tests.")
    p.add_argument("--arch", required=True, choices=sorted(gr.CONFIGS))
    p.add_argument("--img-size", type=int, required=True,
                   help=f"model size S (multiple of {gr.SIZE_MULTIPLE})")
    p.add_argument("--checkpoint", help="CorridorKey .pth to load instead of random weights "
                                        "(pos_embed is resized to --img-size)")
    p.add_argument("--backbone-size", type=int,
                   help="run the encoder at this size (the reference's GreenFormer(backbone_size=)): "
                        "the input is resized bilinearly for it, the refiner stays at --img-size")
    p.add_argument("--seed", type=int, default=0, help="seed for weights and inputs (default 0)")
    p.add_argument("--output", help="TorchScript file to write")
    p.add_argument("--fixture", help="write {'input', c1..fg} eager reference tensors here")
    p.add_argument("--ts-outputs", choices=("tuple", "dict"), default="tuple",
                   help="--output forward returns the 13-tuple (default) or {'alpha', 'fg'}")
    p.add_argument("--write-pth", help="write the weights with torch.save as a checkpoint")
    p.add_argument("--pth-layout", choices=("state_dict", "top", "compiled", "ema", "training"),
                   default="state_dict",
                   help="'state_dict': {'state_dict': sd}; 'top': model.state_dict() itself; "
                        "'compiled': torch.compile(model).state_dict() (_orig_mod. keys); "
                        "'ema': {'model_ema': sd}; 'training': {'state_dict', 'optimizer' "
                        "(AdamW after one step), 'epoch', 'config'}")
    p.add_argument("--pth-dtype", choices=("float32", "bfloat16", "float16"), default="float32",
                   help="dtype of the saved weights (model.to(dtype).state_dict())")
    p.add_argument("--pth-legacy", action="store_true",
                   help="torch.save(..., _use_new_zipfile_serialization=False)")
    p.add_argument("--pth-protocol", type=int, default=2, choices=(2, 3, 4, 5),
                   help="pickle protocol of --write-pth (default 2, as torch.save)")
    p.add_argument("--pos-embed-fixture", help="write {'src', 'dst'} pos_embed resize fixture")
    p.add_argument("--pos-embed-from", type=int, help="source grid G1 for --pos-embed-fixture")
    p.add_argument("--pos-embed-to", type=int, help="target grid G2 for --pos-embed-fixture")
    a = p.parse_args(argv)

    try:
        gr.check_img_size(a.img_size)
    except ValueError as e:
        p.error(f"--img-size: {e}")
    if a.backbone_size is not None:
        try:
            gr.check_img_size(a.backbone_size)
        except ValueError as e:
            p.error(f"--backbone-size: {e}")
        if a.backbone_size > a.img_size:
            p.error(f"--backbone-size {a.backbone_size} is larger than --img-size {a.img_size}")
    if a.pos_embed_fixture and (a.pos_embed_from is None or a.pos_embed_to is None):
        p.error("--pos-embed-fixture needs --pos-embed-from and --pos-embed-to")
    for name in ("pos_embed_from", "pos_embed_to"):
        v = getattr(a, name)
        if v is not None and v <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive, got {v}")
    if a.checkpoint and not os.path.isfile(a.checkpoint):
        p.error(f"--checkpoint: no such file: {a.checkpoint}")
    if not (a.output or a.fixture or a.write_pth or a.pos_embed_fixture):
        p.error("nothing to do: give at least one of --output, --fixture, --write-pth, "
                "--pos-embed-fixture")
    return a


def main(argv=None) -> int:
    a = parse_args(argv)
    torch.set_grad_enabled(False)
    # torch 2.15 flags torch.jit.trace/save as deprecated; the C++ side still loads
    # TorchScript, so keep the output to one line per file written.
    warnings.filterwarnings("ignore", category=FutureWarning, message=r".*torch\.jit\.")

    needs_model = bool(a.output or a.fixture or a.write_pth)
    model = None
    if needs_model:
        t0 = time.perf_counter()
        model = gr.build_greenformer(a.arch, a.img_size, a.backbone_size)
        if a.checkpoint:
            info = gr.load_corridorkey_pth(model, a.checkpoint)
            src = f"checkpoint {a.checkpoint}" + (
                f" (pos_embed {info['pos_embed_from']} -> {info['pos_embed_to']})" if info else "")
        else:
            gr.randomize_(model, a.seed)
            src = f"random weights, seed {a.seed}"
        model = model.float().eval()
        if a.ts_outputs == "dict":
            model.__class__ = _DictOutputs
        n_params = sum(p.numel() for p in model.parameters())
        print(f"built {a.arch} S={a.img_size}: {n_params:,} parameters, {src} "
              f"[{time.perf_counter() - t0:.2f}s]")

    if a.output:
        t0 = time.perf_counter()
        example = make_input(a.img_size, a.seed + INPUT_SEED_OFFSET)
        traced = torch.jit.trace(model, (example,), strict=False, check_trace=False)
        torch.jit.save(traced, a.output,
                       _extra_files={"config.json": config_json(a.arch, a.img_size)})
        outputs = "{alpha, fg}" if a.ts_outputs == "dict" else f"{len(gr.OUTPUT_NAMES)} outputs"
        print(f"wrote {a.output}: TorchScript {a.arch} S={a.img_size}, {outputs}, "
              f"{human_size(a.output)} [{time.perf_counter() - t0:.2f}s]")

    if a.fixture:
        t0 = time.perf_counter()
        x = make_input(a.img_size, a.seed + INPUT_SEED_OFFSET)
        outs = gr.GreenFormer.forward(model, x)
        fixture = {"input": x}
        for name, t in zip(gr.OUTPUT_NAMES, outs):
            fixture[name] = t.detach().contiguous().clone()
        torch.save(fixture, a.fixture)
        print(f"wrote {a.fixture}: fixture input {list(x.shape)} + {len(outs)} outputs, "
              f"{human_size(a.fixture)} [{time.perf_counter() - t0:.2f}s]")

    if a.write_pth:
        t0 = time.perf_counter()
        dtype = getattr(torch, a.pth_dtype)
        weights = model if dtype == torch.float32 else copy.deepcopy(model).to(dtype)
        obj = checkpoint_object(weights, a.pth_layout, a.arch, a.img_size)
        torch.save(obj, a.write_pth, pickle_protocol=a.pth_protocol,
                   _use_new_zipfile_serialization=not a.pth_legacy)
        print(f"wrote {a.write_pth}: checkpoint layout={a.pth_layout} dtype={a.pth_dtype}"
              f"{' legacy format' if a.pth_legacy else ''} protocol {a.pth_protocol}, "
              f"{human_size(a.write_pth)} [{time.perf_counter() - t0:.2f}s]")

    if a.pos_embed_fixture:
        dim = gr.resolve_config(a.arch)["embed_dim"]
        g = torch.Generator().manual_seed(a.seed + POS_EMBED_SEED_OFFSET)
        src = torch.randn(1, a.pos_embed_from ** 2, dim, generator=g)
        dst = gr.resize_pos_embed(src, a.pos_embed_to).contiguous().clone()
        torch.save({"src": src, "dst": dst}, a.pos_embed_fixture)
        print(f"wrote {a.pos_embed_fixture}: pos_embed {list(src.shape)} -> {list(dst.shape)} "
              f"(bicubic, align_corners=False)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (ValueError, KeyError, RuntimeError, OSError) as e:
        print(f"export_torchscript.py: error: {e}", file=sys.stderr)
        sys.exit(1)
