"""Checks bench --roofline's nominal FLOPs against PyTorch's own count of the reference.

For each size, the reference GreenFormer (greenformer_ref.py, current timm, whose global
attention is 4-D SDPA) runs one forward under torch.utils.flop_counter.FlopCounterMode,
which counts 2 per multiply-add of every matrix product and convolution and the attention
products of SDPA. The engine's count (`corridorkey-engine bench --roofline --count-only
--json`, from the shapes alone) must equal it part by part: the encoder's global attention, windowed
attention and linear layers (bench --roofline's split), the encoder, both decoder heads, the
refiner. Two sizes, so a count that does not scale with the shapes fails.

    python tools/check_flops.py --engine build/apps/corridorkey-engine/corridorkey-engine \
        [--arch hiera_base_plus] [--sizes 512 256]

Exit 0 when every part agrees within --tolerance (relative, default 1e-6), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import torch
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from greenformer_ref import build_greenformer  # noqa: E402


def reference_counts(arch: str, size: int) -> dict:
    model = build_greenformer(arch, size).eval()
    x = torch.rand(1, 4, size, size)
    counter = FlopCounterMode(display=False)
    with torch.inference_mode(), counter:
        model(x)
    per_module = counter.get_flop_counts()

    def total(name: str) -> int:
        return sum(per_module.get(name, {}).values())

    # The encoder's attention products by kind: in each block's attention module, what is
    # not a Linear (addmm/mm) is its products (SDPA, or bmm where timm's 5-D windowed path
    # runs SDPA's math kernel); timm's own flag says whether the block is windowed.
    attention = {"global_attention": 0, "windowed_attention": 0}
    for i, blk in enumerate(model.encoder.model.blocks):
        ops = per_module.get(f"GreenFormer.encoder.model.blocks.{i}.attn", {})
        products = sum(v for op, v in ops.items() if str(op) not in ("aten.addmm", "aten.mm"))
        attention["windowed_attention" if blk.attn.use_mask_unit_attn else "global_attention"] += products
    return {
        "global_attention": attention["global_attention"],
        "windowed_attention": attention["windowed_attention"],
        "encoder_linear": total("GreenFormer.encoder") - sum(attention.values()),
        "encoder": total("GreenFormer.encoder"),
        "decoders": total("GreenFormer.alpha_decoder") + total("GreenFormer.fg_decoder"),
        "refiner": total("GreenFormer.refiner"),
        "total": counter.get_total_flops(),
    }


def engine_counts(engine: str, arch: str, size: int) -> dict:
    out = subprocess.run([engine, "bench", "--roofline", "--count-only", "--json", "--random-weights",
                          "--arch", arch, "--img-size", str(size)],
                         check=True, capture_output=True, text=True).stdout
    j = json.loads(out.strip().splitlines()[-1])
    return {"global_attention": j["global_attention"], "windowed_attention": j["windowed_attention"],
            "encoder_linear": j["encoder_linear"],
            "encoder": j["encoder_linear"] + j["encoder_attention"], "decoders": j["decoders"],
            "refiner": j["refiner"], "total": j["total"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", required=True, help="the corridorkey-engine binary")
    ap.add_argument("--arch", default="hiera_base_plus")
    ap.add_argument("--sizes", type=int, nargs="+", default=[512, 256])
    ap.add_argument("--tolerance", type=float, default=1e-6)
    args = ap.parse_args()
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    failed = False
    for size in args.sizes:
        ref, ours = reference_counts(args.arch, size), engine_counts(args.engine, args.arch, size)
        for part in ("global_attention", "windowed_attention", "encoder_linear", "encoder", "decoders",
                     "refiner", "total"):
            r, o = ref[part], ours[part]
            ok = r > 0 and abs(o - r) <= args.tolerance * r
            failed |= not ok
            print(f"{args.arch} at {size}: {part:18s} FlopCounterMode {r / 1e9:12.4f} GFLOP, "
                  f"engine {o / 1e9:12.4f} GFLOP {'ok' if ok else 'DIFFERENT'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
