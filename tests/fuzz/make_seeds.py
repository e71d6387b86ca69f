#!/usr/bin/env python3
"""Seed corpora for the fuzz targets (scripts/fuzz.sh): small valid inputs of every format
each target reads, so the fuzzer starts from the interesting paths. Generated, not
committed: the same command writes the same files.

  python tests/fuzz/make_seeds.py OUT_DIR
"""
import io
import json
import warnings
import os
import sys
import zipfile
from collections import OrderedDict

import numpy as np
import torch

os.environ.setdefault("OPENCV_IO_ENABLE_OPENEXR", "1")
import cv2  # noqa: E402

warnings.filterwarnings("ignore", category=FutureWarning)  # torch.jit is deprecated, still read
out = sys.argv[1]
for d in ("image", "yaml", "config_json", "checkpoint", "safetensors"):
    os.makedirs(os.path.join(out, d), exist_ok=True)


def put(target, name, data: bytes):
    with open(os.path.join(out, target, name), "wb") as f:
        f.write(data)


# image: first byte selects the extension (0 exr, 1 png, 2 tif, 3 jpg, 4 bmp, 5 dpx).
img = (np.linspace(0, 1, 8 * 6 * 3).reshape(6, 8, 3)).astype(np.float32)
for i, (ext, arr, params) in enumerate([
        (".exr", img, [cv2.IMWRITE_EXR_TYPE, cv2.IMWRITE_EXR_TYPE_HALF]),
        (".png", (img * 65535).astype(np.uint16), []),
        (".tif", (img * 255).astype(np.uint8), []),
        (".jpg", (img * 255).astype(np.uint8), []),
        (".bmp", (img * 255).astype(np.uint8), [])]):
    ok, buf = cv2.imencode(ext, arr, params)
    assert ok, ext
    put("image", f"seed{ext}", bytes([i]) + buf.tobytes())
ok, buf = cv2.imencode(".png", (img[..., 0] * 255).astype(np.uint8))
put("image", "grey.png", bytes([1]) + buf.tobytes())
# Truncated frames (they keyed as successes once): a JPEG cut at 50 and 90%, and a 10-bit DPX
# (written by oiiotool, as a scan would be) whole and cut inside its pixel data.
ok, buf = cv2.imencode(".jpg", (np.random.default_rng(3).random((48, 64, 3)) * 255).astype(np.uint8))
for pct in (50, 90):
    put("image", f"cut{pct}.jpg", bytes([3]) + buf.tobytes()[: len(buf) * pct // 100])
import shutil, subprocess, tempfile  # noqa: E402
if shutil.which("oiiotool"):
    with tempfile.TemporaryDirectory() as tmp:
        png = os.path.join(tmp, "p.png")
        cv2.imwrite(png, (img * 255).astype(np.uint8))
        dpx = os.path.join(tmp, "p.dpx")
        subprocess.run(["oiiotool", png, "-d", "uint10", "-o", dpx], check=True)
        data = open(dpx, "rb").read()
        put("image", "seed.dpx", bytes([5]) + data)
        put("image", "cut.dpx", bytes([5]) + data[: len(data) - 40])

# yaml: a profile and a job file.
for name in ("original", "optimized"):
    put("yaml", f"{name}.yaml", open(os.path.join(os.path.dirname(__file__), "..", "..",
                                                  "profiles", name + ".yaml"), "rb").read())
put("yaml", "job.yaml", open(os.path.join(os.path.dirname(__file__), "..", "..", "jobs",
                                          "example.yaml"), "rb").read())
put("yaml", "field", b"tile_size\n256")

# config_json: the shapes of both architectures.
base = {"format_version": 1, "arch": "tiny", "img_size": 128, "embed_dim": 16, "num_heads": 1,
        "stages": [1, 1, 2, 1], "q_pool": 3, "q_stride": [2, 2], "mask_unit_size": [8, 8],
        "mask_unit_attn": [True, True, False, False], "dim_mul": 2.0, "head_mul": 2.0,
        "patch_kernel": [7, 7], "patch_stride": [4, 4], "patch_padding": [3, 3],
        "mlp_ratio": 4.0, "in_chans": 4, "decoder_dim": 32, "refiner_channels": 16,
        "refiner_groups": 8}
put("config_json", "tiny.json", json.dumps(base).encode())
put("config_json", "base_plus.json", json.dumps(dict(base, embed_dim=112, num_heads=2,
                                                     stages=[2, 3, 16, 3])).encode())

# checkpoint: first byte 0 = torch.save pickle, 1 = TorchScript pickle, 2 = whole file.
sd = OrderedDict([("a.weight", torch.arange(6, dtype=torch.float32).view(2, 3)),
                  ("a.bias", torch.zeros(2, dtype=torch.bfloat16)),
                  ("n", torch.tensor(3))])
sd._metadata = OrderedDict([("a", {"version": 1})])
for proto in (2, 4):
    buf = io.BytesIO()
    torch.save({"state_dict": sd, "epoch": 7, "config": {"lr": 1e-3}}, buf, pickle_protocol=proto)
    raw = buf.getvalue()
    put("checkpoint", f"train_p{proto}.pth", bytes([2]) + raw)
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        pkl = next(n for n in z.namelist() if n.endswith("data.pkl"))
        put("checkpoint", f"train_p{proto}.pkl", bytes([0]) + z.read(pkl))
buf = io.BytesIO()
torch.save(sd, buf, _use_new_zipfile_serialization=False)
put("checkpoint", "legacy.pth", bytes([2]) + buf.getvalue())


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.lin(x)


buf = io.BytesIO()
torch.jit.save(torch.jit.script(Tiny()), buf)
raw = buf.getvalue()
put("checkpoint", "scripted.ts", bytes([2]) + raw)
with zipfile.ZipFile(io.BytesIO(raw)) as z:
    pkl = next(n for n in z.namelist() if n.endswith("data.pkl"))
    put("checkpoint", "scripted.pkl", bytes([1]) + z.read(pkl))
# safetensors: files from the package itself (every dtype, metadata, an empty and a 0-d
# tensor), then the hostile shapes the reader refuses (tests/model/test_safetensors.cpp).
from safetensors.torch import save as st_save  # noqa: E402
t = torch.arange(12, dtype=torch.float64).reshape(3, 4)
put("safetensors", "dtypes.safetensors", st_save(  # base: the tiny config_json seed above
    {n: t.to(getattr(torch, n)) for n in ("float64", "float32", "float16", "bfloat16", "int64",
                                             "int32", "int16", "int8", "uint8", "float8_e4m3fn",
                                             "float8_e5m2")}
    | {"bool": t > 5, "empty": torch.empty(0, 3), "scalar": torch.tensor(1.5)},
    metadata={"corridorkey_config": json.dumps(base), "note": "seed"}))
put("safetensors", "weights.safetensors", st_save({"encoder.model.patch_embed.proj.weight": torch.ones(16, 4, 7, 7),
                                                  "_orig_mod.a.num_batches_tracked": torch.tensor(3)}))


def raw(header: str, data: bytes = b"", length=None) -> bytes:
    h = header.encode()
    n = len(h) if length is None else length
    return n.to_bytes(8, "little") + h + data


ok = '"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}'
for name, blob in {
        "len_beyond": raw("{" + ok + "}", bytes(24), 1 << 20),
        "duplicate": raw("{" + ok + "," + ok + "}", bytes(24)),
        "overlap": raw('{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},'
                       '"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}}', bytes(24)),
        "mismatch": raw('{"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}}', bytes(24)),
        "overflow": raw('{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}}', bytes(4)),
        "negative": raw('{"w":{"dtype":"I8","shape":[-1],"data_offsets":[0,1]}}', b"x"),
        "bool_bytes": raw('{"w":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}}', b"\x00\x07"),
        "subbyte": raw('{"w":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}}', b"x"),
        "trailing": raw("{" + ok + "}  x", bytes(24)),
        "metadata": raw('{"__metadata__":{"a":"b","c":1},' + ok + "}", bytes(24)),
        "truncated": raw("{" + ok + "}", bytes(10))}.items():
    put("safetensors", name + ".safetensors", blob)
print(f"fuzz seeds written to {out}")
