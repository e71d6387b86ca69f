"""Python reference GreenFormer (CorridorKey keying network), built on timm's Hiera.

This module is the single Python source of truth the C++/LibTorch port is checked
against (tools/README.md describes what it mirrors of timm). It provides:

  CONFIGS                      named architectures ("hiera_base_plus" = production, "tiny" = tests)
  build_greenformer(arch, S)   an nn.Module whose state_dict keys equal CorridorKey.pth keys
  randomize_(model, seed)      deterministic random weights that exercise every parameter
  load_corridorkey_pth(m, p)   checkpoint loader (prefix strip, pos_embed resize, strict)
  resize_pos_embed(pe, g)      the bicubic pos_embed resize the loader uses

GreenFormer.forward returns a 13-tuple; OUTPUT_NAMES gives the order (the C++ side
indexes the traced module's output by position).
"""

from __future__ import annotations

import copy
import math
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import torch
import torch.nn as nn
import torch.nn.functional as F

import timm

__all__ = [
    "CONFIGS",
    "OUTPUT_NAMES",
    "GreenFormer",
    "DecoderHead",
    "Refiner",
    "build_greenformer",
    "randomize_",
    "load_corridorkey_pth",
    "resize_pos_embed",
    "resolve_config",
]

# Keys every config must carry, in the order they are written to config.json.
CONFIG_KEYS = (
    "embed_dim", "num_heads", "stages", "q_pool", "q_stride", "mask_unit_size",
    "mask_unit_attn", "dim_mul", "head_mul", "patch_kernel", "patch_stride",
    "patch_padding", "mlp_ratio", "in_chans", "decoder_dim", "refiner_channels",
    "refiner_groups",
)

CONFIGS: Dict[str, Dict[str, Any]] = {
    # timm hiera_base_plus_224 with a 4-channel patch embed: the published CorridorKey model.
    "hiera_base_plus": {
        "embed_dim": 112,
        "num_heads": 2,
        "stages": [2, 3, 16, 3],
        "q_pool": 3,
        "q_stride": [2, 2],
        "mask_unit_size": [8, 8],
        "mask_unit_attn": [True, True, False, False],
        "dim_mul": 2.0,
        "head_mul": 2.0,
        "patch_kernel": [7, 7],
        "patch_stride": [4, 4],
        "patch_padding": [3, 3],
        "mlp_ratio": 4.0,
        "in_chans": 4,
        "decoder_dim": 256,
        "refiner_channels": 64,
        "refiner_groups": 8,
    },
    # Same topology (4 stages, 3 q-pools, windowed then global attention, expand-proj
    # blocks), ~100x fewer FLOPs: a 128x128 forward is a few ms on one CPU core.
    "tiny": {
        "embed_dim": 16,
        "num_heads": 1,
        "stages": [1, 1, 2, 1],
        "q_pool": 3,
        "q_stride": [2, 2],
        "mask_unit_size": [8, 8],
        "mask_unit_attn": [True, True, False, False],
        "dim_mul": 2.0,
        "head_mul": 2.0,
        "patch_kernel": [7, 7],
        "patch_stride": [4, 4],
        "patch_padding": [3, 3],
        "mlp_ratio": 4.0,
        "in_chans": 4,
        "decoder_dim": 32,
        "refiner_channels": 16,
        "refiner_groups": 8,
    },
}
# The bundled model: tiny's topology, twice its widths and more blocks (about 3x the
# encoder/decoder cost; the refiner, the main CPU cost, as tiny). As GreenFormerConfig::small.
CONFIGS["small"] = {**copy.deepcopy(CONFIGS["tiny"]), "embed_dim": 32, "stages": [1, 2, 4, 1],
                    "decoder_dim": 64}

OUTPUT_NAMES = (
    "c1", "c2", "c3", "c4",
    "alpha_logits", "fg_logits",
    "alpha_logits_up", "fg_logits_up",
    "alpha_coarse", "fg_coarse",
    "delta_logits",
    "alpha", "fg",
)

# The whole image must split into 8x8-token mask units after the stride-4 patch embed.
SIZE_MULTIPLE = 32


def resolve_config(arch_or_config: Union[str, Mapping[str, Any]]) -> Dict[str, Any]:
    """Return a validated copy of a named config or of a user-supplied config dict."""
    if isinstance(arch_or_config, str):
        if arch_or_config not in CONFIGS:
            raise ValueError(f"unknown arch '{arch_or_config}', expected one of {sorted(CONFIGS)}")
        return copy.deepcopy(CONFIGS[arch_or_config])
    cfg = {k: copy.deepcopy(v) for k, v in arch_or_config.items() if k in CONFIG_KEYS}
    missing = [k for k in CONFIG_KEYS if k not in cfg]
    if missing:
        raise ValueError(f"config dict is missing keys {missing}")
    return cfg


def check_img_size(img_size: int) -> None:
    if not isinstance(img_size, int) or img_size <= 0 or img_size % SIZE_MULTIPLE != 0:
        raise ValueError(
            f"img_size must be a positive multiple of {SIZE_MULTIPLE} "
            f"(patch stride 4 x mask unit 8), got {img_size!r}")


# --------------------------------------------------------------------------------------
# Decoder
# --------------------------------------------------------------------------------------
class TokenLinear(nn.Module):
    """Per-pixel Linear on an NCHW map, done the way the reference does it
    (flatten HW into tokens, Linear over channels, back to NCHW), so the attribute is
    named `proj` as in the checkpoint (linear_cK.proj.*)."""

    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.proj = nn.Linear(in_dim, out_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, _, h, w = x.shape
        x = x.flatten(2).transpose(1, 2)          # [N, HW, C]
        x = self.proj(x)                          # [N, HW, D]
        return x.permute(0, 2, 1).reshape(n, -1, h, w)


class DecoderHead(nn.Module):
    """SegFormer-style all-MLP head: project each stage to `dim`, upsample to the
    stride-4 grid, concat [c4, c3, c2, c1], 1x1 fuse conv, BN, ReLU, dropout, classifier."""

    def __init__(self, in_channels: List[int], dim: int, out_channels: int, dropout: float = 0.1):
        super().__init__()
        if len(in_channels) != 4:
            raise ValueError(f"DecoderHead expects 4 input feature maps, got {len(in_channels)}")
        self.linear_c1 = TokenLinear(in_channels[0], dim)
        self.linear_c2 = TokenLinear(in_channels[1], dim)
        self.linear_c3 = TokenLinear(in_channels[2], dim)
        self.linear_c4 = TokenLinear(in_channels[3], dim)
        self.linear_fuse = nn.Conv2d(4 * dim, dim, kernel_size=1, bias=False)
        self.bn = nn.BatchNorm2d(dim)
        self.relu = nn.ReLU(inplace=True)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Conv2d(dim, out_channels, kernel_size=1)

    # The ReLU runs in place, as the reference's nn.ReLU(inplace=True) does: at 1024 that
    # spares one 256-channel S/4 map (64 MiB fp32) per head.
    def forward(self, c1: torch.Tensor, c2: torch.Tensor, c3: torch.Tensor,
                c4: torch.Tensor) -> torch.Tensor:
        size = c1.shape[2:]
        p1 = self.linear_c1(c1)
        p2 = F.interpolate(self.linear_c2(c2), size=size, mode="bilinear", align_corners=False)
        p3 = F.interpolate(self.linear_c3(c3), size=size, mode="bilinear", align_corners=False)
        p4 = F.interpolate(self.linear_c4(c4), size=size, mode="bilinear", align_corners=False)
        x = self.linear_fuse(torch.cat([p4, p3, p2, p1], dim=1))
        x = self.dropout(self.relu(self.bn(x)))
        return self.classifier(x)


# --------------------------------------------------------------------------------------
# Refiner
# --------------------------------------------------------------------------------------
class RefinerBlock(nn.Module):
    """Dilated residual block: relu(GN(conv)) -> GN(conv) -> relu(. + x).

    The ReLUs and the residual add run in place, op for op as the reference's RefinerBlock
    (nn.ReLU(inplace=True), `out += residual`): each spares a 64-channel full-size map,
    256 MiB fp32 at 1024 and 1 GiB at 2048, and the time to fill it. A benchmark against
    an out-of-place copy would flatter the engine (issue 24 measured 1.2-1.3x)."""

    def __init__(self, channels: int, groups: int, dilation: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=dilation, dilation=dilation)
        self.gn1 = nn.GroupNorm(groups, channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=dilation, dilation=dilation)
        self.gn2 = nn.GroupNorm(groups, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu_(self.gn1(self.conv1(x)))
        out = self.gn2(self.conv2(out))
        out += x
        return F.relu_(out)


class Refiner(nn.Module):
    """Full-resolution CNN: 7 ch (rgb, coarse alpha, coarse fg) -> 4 delta logits.
    Receptive-field radius 1 + 2*(1+2+4+8) = 31 px."""

    def __init__(self, in_channels: int = 7, channels: int = 64, groups: int = 8,
                 out_channels: int = 4):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, channels, 3, padding=1),
            nn.GroupNorm(groups, channels),
            nn.ReLU(inplace=True),
        )
        self.res1 = RefinerBlock(channels, groups, 1)
        self.res2 = RefinerBlock(channels, groups, 2)
        self.res3 = RefinerBlock(channels, groups, 4)
        self.res4 = RefinerBlock(channels, groups, 8)
        self.final = nn.Conv2d(channels, out_channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = self.res4(self.res3(self.res2(self.res1(x))))
        return self.final(x) * 10.0


# --------------------------------------------------------------------------------------
# Whole model
# --------------------------------------------------------------------------------------
def _build_encoder(cfg: Dict[str, Any], img_size: int) -> nn.Module:
    """timm Hiera wrapped by timm's FeatureGetterNet (an nn.ModuleDict holding `model`),
    which gives the checkpoint's `encoder.model.` prefix."""
    encoder = timm.create_model(
        "hiera_base_plus_224",
        pretrained=False,
        features_only=True,
        out_indices=(0, 1, 2, 3),
        img_size=(img_size, img_size),
        in_chans=cfg["in_chans"],
        embed_dim=cfg["embed_dim"],
        num_heads=cfg["num_heads"],
        stages=tuple(cfg["stages"]),
        q_pool=cfg["q_pool"],
        q_stride=tuple(cfg["q_stride"]),
        mask_unit_size=tuple(cfg["mask_unit_size"]),
        mask_unit_attn=tuple(bool(b) for b in cfg["mask_unit_attn"]),
        dim_mul=cfg["dim_mul"],
        head_mul=cfg["head_mul"],
        patch_kernel=tuple(cfg["patch_kernel"]),
        patch_stride=tuple(cfg["patch_stride"]),
        patch_padding=tuple(cfg["patch_padding"]),
        mlp_ratio=cfg["mlp_ratio"],
    )
    hiera = encoder.model

    # features_only prunes the classifier head (reset_classifier(0, reset_other=True) turns
    # head.norm / head.fc into Identity). Guard against timm versions that leave weights
    # there: forward_intermediates never touches the head, so dropping it is safe and keeps
    # the state_dict equal to the checkpoint's key set.
    if any(True for _ in hiera.head.parameters()) or any(True for _ in hiera.head.buffers()):
        hiera.head = nn.Identity()
    stray = [n for n, _ in hiera.named_parameters()
             if not (n == "pos_embed" or n.startswith("patch_embed.") or n.startswith("blocks."))]
    if stray:
        raise RuntimeError(f"timm Hiera has parameters the checkpoint does not: {stray}")

    # Feature taps must be the four stage ends, without a final norm.
    stage_ends = [sum(cfg["stages"][:i + 1]) - 1 for i in range(len(cfg["stages"]))]
    if list(hiera.stage_ends) != stage_ends:
        raise RuntimeError(f"timm stage_ends {hiera.stage_ends} != expected {stage_ends}")
    taps = [hiera.stage_ends[i] for i in encoder.out_indices]
    if taps != stage_ends or encoder.norm:
        raise RuntimeError(f"unexpected feature taps {taps} (norm={encoder.norm})")

    # Upstream runs attention through F.scaled_dot_product_attention. timm switches it off
    # when timm.layers.set_exportable(True) or TIMM_FUSED_ATTN=0; force it back on so the
    # reference and the traced graph contain aten::scaled_dot_product_attention.
    for blk in hiera.blocks:
        blk.attn.fused_attn = True
    return encoder


class GreenFormer(nn.Module):
    """Hiera encoder + alpha/fg DecoderHeads + CNN refiner. See model.md."""

    def __init__(self, cfg: Dict[str, Any], img_size: int, backbone_size: Optional[int] = None):
        super().__init__()
        check_img_size(img_size)
        if backbone_size is not None:
            check_img_size(backbone_size)
        self.config = dict(cfg)
        self.img_size = img_size
        # As the reference's GreenFormer(backbone_size=...): the encoder is built (and its
        # pos_embed sized) for backbone_size; None = img_size.
        self.backbone_size = backbone_size
        self.encoder = _build_encoder(cfg, backbone_size or img_size)
        chans = list(self.encoder.feature_info.channels())
        dim = cfg["decoder_dim"]
        self.alpha_decoder = DecoderHead(chans, dim, 1)
        self.fg_decoder = DecoderHead(chans, dim, 3)
        self.refiner = Refiner(in_channels=7, channels=cfg["refiner_channels"],
                               groups=cfg["refiner_groups"], out_channels=4)

    def forward(self, x: torch.Tensor, refiner_scale: float = 1.0) -> Tuple[torch.Tensor, ...]:
        b = self.backbone_size
        # The reference resizes the whole 4-channel input (bilinear, align_corners=False, no
        # antialias) for the encoder; the refiner keeps the full-size x.
        xb = x if b is None or tuple(x.shape[2:]) == (b, b) else F.interpolate(
            x, size=(b, b), mode="bilinear", align_corners=False)
        c1, c2, c3, c4 = self.encoder(xb)
        alpha_logits = self.alpha_decoder(c1, c2, c3, c4)
        fg_logits = self.fg_decoder(c1, c2, c3, c4)
        size = x.shape[2:]
        alpha_logits_up = F.interpolate(alpha_logits, size=size, mode="bilinear", align_corners=False)
        fg_logits_up = F.interpolate(fg_logits, size=size, mode="bilinear", align_corners=False)
        alpha_coarse = torch.sigmoid(alpha_logits_up)
        fg_coarse = torch.sigmoid(fg_logits_up)
        # The refiner sees the NORMALISED rgb, not the 0..1 image.
        refiner_in = torch.cat([x[:, :3], alpha_coarse, fg_coarse], dim=1)
        delta_logits = self.refiner(refiner_in) * refiner_scale
        alpha = torch.sigmoid(alpha_logits_up + delta_logits[:, 0:1])
        fg = torch.sigmoid(fg_logits_up + delta_logits[:, 1:4])
        return (c1, c2, c3, c4, alpha_logits, fg_logits, alpha_logits_up, fg_logits_up,
                alpha_coarse, fg_coarse, delta_logits, alpha, fg)


def build_greenformer(arch_or_config: Union[str, Mapping[str, Any]], img_size: int,
                      backbone_size: Optional[int] = None) -> GreenFormer:
    """Build a GreenFormer (timm default init; call randomize_ or load_corridorkey_pth)."""
    return GreenFormer(resolve_config(arch_or_config), img_size, backbone_size)


# --------------------------------------------------------------------------------------
# Deterministic random weights
# --------------------------------------------------------------------------------------
def _trunc_normal(shape, std: float, g: torch.Generator) -> torch.Tensor:
    t = torch.empty(shape, dtype=torch.float32)
    return nn.init.trunc_normal_(t, std=std, a=-2.0 * std, b=2.0 * std, generator=g)


def _normal(shape, mean: float, std: float, g: torch.Generator) -> torch.Tensor:
    return torch.randn(shape, generator=g, dtype=torch.float32) * std + mean


def _uniform(shape, lo: float, hi: float, g: torch.Generator) -> torch.Tensor:
    return torch.rand(shape, generator=g, dtype=torch.float32) * (hi - lo) + lo


@torch.no_grad()
def randomize_(model: nn.Module, seed: int = 0) -> nn.Module:
    """Overwrite every parameter and float buffer with seeded random values.

    Independent of global RNG state and of the model's device (values are drawn on the
    CPU from a private generator, in named_modules order). The scales are chosen so
    every path carries signal at S = 128..512:
      * pos_embed std 0.5 (comparable to the patch-embed output, so token order and the
        pos_embed resize matter);
      * Linear / conv weights trunc-normal with std gain/sqrt(fan_in): gain 1 for layers
        feeding a nonlinearity or softmax (attention scores ~unit variance, so attention
        is far from uniform), 0.5 for residual-branch outputs (attn.proj, mlp.fc2) to
        keep the residual stream tame over 24 blocks;
      * refiner.final (zero-initialised upstream) std 0.01 -> delta logits O(0.1..1);
      * LayerNorm / GroupNorm weight 1 + N(0, 0.1), biases N(0, 0.05);
      * BatchNorm weight U(0.5, 1.5), bias N(0, 0.1), running_mean N(0, 0.1),
        running_var U(0.5, 1.5).
    """
    g = torch.Generator(device="cpu")
    g.manual_seed(int(seed))

    def assign(t: torch.Tensor, value: torch.Tensor) -> None:
        t.copy_(value.to(device=t.device, dtype=t.dtype))

    for mname, m in model.named_modules():
        leaf = mname.rsplit(".", 1)[-1]
        if hasattr(m, "pos_embed") and isinstance(getattr(m, "pos_embed"), nn.Parameter):
            pe = m.pos_embed
            assign(pe, _trunc_normal(pe.shape, 0.5, g))
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            w = m.weight
            fan_in = w[0].numel()
            if mname.endswith("refiner.final"):
                std = 0.01
            elif leaf in ("fc2",) or mname.endswith("attn.proj"):
                std = 0.5 / math.sqrt(fan_in)
            else:
                std = 1.0 / math.sqrt(fan_in)
            assign(w, _trunc_normal(w.shape, std, g))
            if m.bias is not None:
                assign(m.bias, _normal(m.bias.shape, 0.0, 0.05, g))
        elif isinstance(m, (nn.LayerNorm, nn.GroupNorm)):
            assign(m.weight, _normal(m.weight.shape, 1.0, 0.1, g))
            assign(m.bias, _normal(m.bias.shape, 0.0, 0.05, g))
        elif isinstance(m, nn.BatchNorm2d):
            assign(m.weight, _uniform(m.weight.shape, 0.5, 1.5, g))
            assign(m.bias, _normal(m.bias.shape, 0.0, 0.1, g))
            assign(m.running_mean, _normal(m.running_mean.shape, 0.0, 0.1, g))
            assign(m.running_var, _uniform(m.running_var.shape, 0.5, 1.5, g))

    # Every parameter must have been touched: catch new module types early.
    known = (nn.Linear, nn.Conv2d, nn.LayerNorm, nn.GroupNorm, nn.BatchNorm2d)
    for mname, m in model.named_modules():
        own = [n for n, _ in m.named_parameters(recurse=False) if n != "pos_embed"]
        if own and not isinstance(m, known):
            raise RuntimeError(f"randomize_: no rule for parameters {own} of {mname} ({type(m).__name__})")
    return model


# --------------------------------------------------------------------------------------
# Checkpoint loading
# --------------------------------------------------------------------------------------
def resize_pos_embed(pe: torch.Tensor, new_grid: int) -> torch.Tensor:
    """[1, g*g, C] -> [1, new_grid^2, C] via bicubic (align_corners=False, no antialias)
    on the square [1, C, g, g] grid; tokens are row-major. Identity if g == new_grid."""
    if pe.dim() != 3 or pe.shape[0] != 1:
        raise ValueError(f"pos_embed must be [1, N, C], got {list(pe.shape)}")
    n, c = pe.shape[1], pe.shape[2]
    g = math.isqrt(n)
    if g * g != n:
        raise ValueError(f"pos_embed token count {n} is not a square grid")
    if g == new_grid:
        return pe
    grid = pe.float().reshape(1, g, g, c).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=(new_grid, new_grid), mode="bicubic",
                         align_corners=False, antialias=False)
    return grid.permute(0, 2, 3, 1).reshape(1, new_grid * new_grid, c).to(pe.dtype).contiguous()


_PREFIX = "_orig_mod."
_POS_EMBED_KEY = "encoder.model.pos_embed"


def _is_nbt(key: str) -> bool:
    return key.endswith("num_batches_tracked")


def load_corridorkey_pth(model: nn.Module, path: str) -> Dict[str, Any]:
    """Load a CorridorKey checkpoint into `model` (strict except num_batches_tracked).

    Accepts {"state_dict": sd} or a bare sd; strips a leading "_orig_mod." from keys;
    resizes pos_embed to the model's grid. Returns {"pos_embed_from": [..], "pos_embed_to": [..]}.
    """
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(ckpt, Mapping):
        raise ValueError(f"{path}: expected a dict checkpoint, got {type(ckpt).__name__}")
    sd = ckpt["state_dict"] if "state_dict" in ckpt else ckpt
    if not isinstance(sd, Mapping):
        raise ValueError(f"{path}: 'state_dict' is a {type(sd).__name__}, expected a dict")

    clean: Dict[str, torch.Tensor] = {}
    for k, v in sd.items():
        if k.startswith(_PREFIX):
            k = k[len(_PREFIX):]
        if _is_nbt(k):
            continue
        if not isinstance(v, torch.Tensor):
            raise ValueError(f"{path}: key '{k}' is a {type(v).__name__}, expected a tensor")
        clean[k] = v

    info: Dict[str, Any] = {}
    target = model.state_dict()
    if _POS_EMBED_KEY in clean and _POS_EMBED_KEY in target:
        src = clean[_POS_EMBED_KEY]
        want = target[_POS_EMBED_KEY].shape
        if src.shape != want:
            if src.dim() != 3 or src.shape[2] != want[2]:
                raise ValueError(f"{path}: pos_embed {list(src.shape)} cannot be resized to {list(want)}")
            new_grid = math.isqrt(want[1])
            clean[_POS_EMBED_KEY] = resize_pos_embed(src, new_grid)
            info = {"pos_embed_from": list(src.shape), "pos_embed_to": list(want)}

    expected = {k for k in target if not _is_nbt(k)}
    missing = sorted(expected - clean.keys())
    unexpected = sorted(clean.keys() - expected)
    if missing or unexpected:
        raise KeyError(f"{path}: checkpoint keys do not match the model: "
                       f"missing {missing[:10]}{'...' if len(missing) > 10 else ''} ({len(missing)}), "
                       f"unexpected {unexpected[:10]}{'...' if len(unexpected) > 10 else ''} "
                       f"({len(unexpected)})")
    bad = [f"{k}: {list(clean[k].shape)} vs {list(target[k].shape)}"
           for k in expected if clean[k].shape != target[k].shape]
    if bad:
        raise ValueError(f"{path}: shape mismatch: {bad[:10]}")
    model.load_state_dict(clean, strict=False)
    return info
