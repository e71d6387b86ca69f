#!/usr/bin/env python3
"""The PyTorch eager reference, timed the way `corridorkey-engine bench` times the engine.

`bench` runs this script in the project venv (a subprocess) with the engine's own weights
and input, so the rows it prints beside our profiles compare the same network, weights,
input, thread count and precision:

  reference       the reference GreenFormer (tools/greenformer_ref.py) with the current timm,
                  whose global attention already hands SDPA 4-D tensors; NCHW
  reference-5d    the same with the 5-D global attention of the timm the reference pins
                  (1.0.24: SDPA falls back to its math kernel)
  reference-fast  the best plain-PyTorch setting for the device: on a CPU with bf16 (AMX or
                  avx512_bf16) bf16 weights + channels-last, on CUDA fp16 weights +
                  channels-last, otherwise fp32 channels-last
  reference-openvino
                  the same module converted by OpenVINO (ov.convert_model, then compiled for
                  the device with INFERENCE_PRECISION_HINT from --precision: bf16 or f32);
                  conversion and compiling are timed apart (setup_ms)
  reference-compile
                  the same module under torch.compile (Inductor) in reference-fast's setting;
                  the first call's compiling is timed apart (setup_ms)
  reference-upstream
                  the reference package itself: CorridorKeyModule.core.model_transformer's
                  GreenFormer imported from a CorridorKey checkout (--reference-dir), its own
                  forward, timed by hooks; hiera_base_plus only, as that class hard-codes it

All variants run as the reference's CorridorKeyEngine.process_frame does on this device:
under torch.inference_mode, with no autocast on a CPU (its precision "auto" is fp32 there),
the model's in-place ReLUs and residual adds included (greenformer_ref.py).

  python tools/bench_reference.py --weights W.pt --input X.pt --arch hiera_base_plus \
      --img-size 1024 --variant reference --precision float32 --threads 2 --frames 3 \
      --warmup 1 --device cpu --output out.pt

Prints one JSON object: per-frame stage times (medians; the whole forward only for the
OpenVINO and compiled rows, which run as one graph), peak RSS of this process and its
growth over the forward, and the precision actually used. --output writes {"alpha", "fg"}
(float32) of the last frame. Weights and input are torch.save files of plain dicts.
A row whose runtime is not installed prints {"variant", "not_installed": PACKAGE} and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import greenformer_ref as gr  # noqa: E402

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def load_dict(path: str):
    """A dict saved by LibTorch's torch::pickle_save (the engine writes these): its typed
    dicts carry torch.jit._pickle.restore_type_tag, which weights_only loading allows here."""
    import torch.jit._pickle as jp
    with torch.serialization.safe_globals([jp.restore_type_tag]):
        return dict(torch.load(path, map_location="cpu", weights_only=True))


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def cpu_has_bf16() -> bool:
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def use_5d_global_attention(model: torch.nn.Module) -> None:
    """Global blocks take the windowed code path with one window, as timm 1.0.24 did: q/k/v
    stay 5-D [B, heads, 1, N, d] and SDPA runs its math kernel."""
    def forward(self, x):
        B, N, _ = x.shape
        num_windows = N // (self.q_stride * self.window_size) if self.use_mask_unit_attn else 1
        qkv = self.qkv(x).reshape(B, -1, num_windows, 3, self.heads, self.head_dim)
        q, k, v = qkv.permute(3, 0, 4, 2, 1, 5).unbind(0)
        if self.q_stride > 1:
            q = q.view(B, self.heads, num_windows, self.q_stride, -1, self.head_dim).amax(dim=3)
        x = F.scaled_dot_product_attention(q, k, v)
        x = x.transpose(1, 3).reshape(B, -1, self.dim_out)
        return self.proj(x)

    for blk in model.encoder.model.blocks:
        blk.attn.forward = forward.__get__(blk.attn)


def timed_forward(model, x, sync):
    """The reference forward (greenformer_ref.GreenFormer.forward), stage by stage."""
    t0 = time.perf_counter()
    c1, c2, c3, c4 = model.encoder(x)
    sync()
    t1 = time.perf_counter()
    alpha_logits = model.alpha_decoder(c1, c2, c3, c4)
    fg_logits = model.fg_decoder(c1, c2, c3, c4)
    sync()
    t2 = time.perf_counter()
    size = x.shape[2:]
    alpha_up = F.interpolate(alpha_logits, size=size, mode="bilinear", align_corners=False)
    fg_up = F.interpolate(fg_logits, size=size, mode="bilinear", align_corners=False)
    refiner_in = torch.cat([x[:, :3], torch.sigmoid(alpha_up), torch.sigmoid(fg_up)], dim=1)
    delta = model.refiner(refiner_in)
    alpha = torch.sigmoid(alpha_up + delta[:, 0:1])
    fg = torch.sigmoid(fg_up + delta[:, 1:4])
    sync()
    t3 = time.perf_counter()
    return alpha, fg, ((t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3, (t3 - t0) * 1e3)


def build_upstream(reference_dir: str, img_size: int) -> torch.nn.Module:
    """The checkout's own GreenFormer. Its constructor prints progress; that goes to stderr
    so that stdout stays one JSON line."""
    root = os.path.abspath(reference_dir)
    pkg = os.path.join(root, "CorridorKeyModule", "core", "model_transformer.py")
    if not os.path.isfile(pkg):
        raise SystemExit(f"--reference-dir {reference_dir}: {pkg} not found (expected a "
                         "CorridorKey checkout, the folder that holds CorridorKeyModule/)")
    # The module file alone (it imports only torch and timm): the package's __init__ may
    # pull in the checkout's whole application.
    import contextlib
    import importlib.util
    spec = importlib.util.spec_from_file_location("ck_upstream_model_transformer", pkg)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with contextlib.redirect_stdout(sys.stderr):
        return mod.GreenFormer(img_size=img_size)


def hooked_forward(model):
    """Times the upstream model's own forward by stage with hooks, so nothing of it is
    re-implemented here: encoder, both decoders, then upsampling + refiner + sigmoids."""
    marks = {}
    model.encoder.register_forward_hook(lambda *_: marks.__setitem__("enc", time.perf_counter()))
    model.fg_decoder.register_forward_hook(lambda *_: marks.__setitem__("dec", time.perf_counter()))

    def run(x, sync):
        t0 = time.perf_counter()
        out = model(x)
        sync()
        t3 = time.perf_counter()
        # A checkout whose GreenFormer is wrapped by torch.compile may skip Python hooks:
        # then only the total is known.
        t1, t2 = marks.pop("enc", t0), marks.pop("dec", t0)
        return out["alpha"], out["fg"], ((t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3,
                                         (t3 - t0) * 1e3)
    return run


class AlphaFg(torch.nn.Module):
    """The reference module with only what a user keeps, (alpha, fg): a graph runtime is not
    made to copy out the intermediate features the reference forward also returns."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x):
        out = self.model(x)
        return out[-2], out[-1]


def graph_forward(run):
    """A whole-graph runtime timed as one stage: encoder, decoders and refiner are not
    separable inside it, so their columns are 0 and the total is the forward."""
    def forward(x, sync):
        t0 = time.perf_counter()
        alpha, fg = run(x)
        sync()
        ms = (time.perf_counter() - t0) * 1e3
        return alpha, fg, (0.0, 0.0, 0.0, ms)
    return forward


def openvino_forward(model, x, precision: str, threads: int):
    """OpenVINO's own PyTorch path: convert the module, compile it for the CPU with the
    inference precision hint (bf16 runs bf16 matmuls and convolutions where the CPU has
    them; f32 keeps float32). Returns (forward, setup_ms)."""
    import warnings
    import openvino as ov
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the converter's tracing warnings are not ours
        ov_model = ov.convert_model(AlphaFg(model), example_input=x)
    config = {"INFERENCE_PRECISION_HINT": "bf16" if precision == "bfloat16" else "f32",
              "PERFORMANCE_HINT": "LATENCY"}
    if threads > 0:
        config["INFERENCE_NUM_THREADS"] = threads
    compiled = ov.Core().compile_model(ov_model, "CPU", config)
    request = compiled.create_infer_request()
    setup_ms = (time.perf_counter() - t0) * 1e3
    # What the plugin really runs: a bf16 hint on a CPU without bf16 falls back to f32.
    used = str(compiled.get_property("INFERENCE_PRECISION_HINT")).lower()
    effective = "bfloat16" if "bf16" in used else "float16" if "f16" in used else "float32"

    def run(inp):
        res = request.infer({0: inp.numpy()})
        return tuple(torch.from_numpy(res[o].copy()) for o in compiled.outputs)
    return graph_forward(run), setup_ms, ov.__version__.split("-")[0], effective


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--weights", required=True)
    ap.add_argument("--input", required=True, help="torch.save {'input': [1,4,S,S]}")
    ap.add_argument("--arch", required=True, choices=sorted(gr.CONFIGS))
    ap.add_argument("--img-size", type=int, required=True)
    ap.add_argument("--variant", required=True, choices=("reference", "reference-5d", "reference-fast", "reference-upstream",
                             "reference-openvino", "reference-compile"))
    ap.add_argument("--reference-dir", help="CorridorKey checkout (reference-upstream)")
    ap.add_argument("--precision", default="float32", choices=sorted(DTYPES))
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--frames", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--output")
    a = ap.parse_args(argv)

    needs = {"reference-openvino": "openvino"}.get(a.variant)
    if needs:
        try:
            __import__(needs)
        except ImportError:
            print(json.dumps({"variant": a.variant, "not_installed": needs}))
            return 0
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    if a.variant == "reference-upstream":
        if not a.reference_dir:
            raise SystemExit("reference-upstream needs --reference-dir (a CorridorKey checkout)")
        if a.arch != "hiera_base_plus":
            raise SystemExit(f"reference-upstream runs hiera_base_plus only (the reference's "
                             f"GreenFormer hard-codes it), not {a.arch}")
        model = build_upstream(a.reference_dir, a.img_size)
    else:
        model = gr.build_greenformer(a.arch, a.img_size)
    sd = load_dict(a.weights)
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [k for k in missing if not k.endswith("num_batches_tracked")]
    if missing or unexpected:
        raise SystemExit(f"weights do not match the reference model: missing {missing[:5]}, "
                         f"unexpected {unexpected[:5]}")
    model.eval()
    if a.variant == "reference-5d":
        use_5d_global_attention(model)

    dtype = DTYPES[a.precision]
    channels_last = False
    if a.variant == "reference-openvino":
        if dev.type != "cpu":
            raise SystemExit(f"reference-openvino runs on the CPU here, not {a.device}")
        # OpenVINO takes the float32 module and lowers precision itself (the hint below).
        dtype = torch.float32
    if a.variant in ("reference-fast", "reference-compile"):
        # reference-compile keeps --precision: bench passes the engine plan's pick.
        channels_last = True
        if a.variant == "reference-compile":
            pass
        elif dev.type == "cuda":
            dtype = torch.float16
        elif dev.type == "cpu":
            dtype = torch.bfloat16 if cpu_has_bf16() else torch.float32
    model = model.to(dev, dtype)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    x = load_dict(a.input)["input"].to(dev, dtype)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    sync = (lambda: torch.cuda.synchronize()) if dev.type == "cuda" else (lambda: None)

    setup_ms, runtime = 0.0, "eager"
    if a.variant == "reference-upstream":
        forward = hooked_forward(model)
    elif a.variant == "reference-openvino":
        forward, setup_ms, version, used = openvino_forward(model, x, a.precision, a.threads)
        dtype, runtime = DTYPES[used], "openvino " + version
    elif a.variant == "reference-compile":
        compiled = torch.compile(AlphaFg(model))
        forward, runtime = graph_forward(compiled), "torch.compile (inductor)"
        # The first call compiles: timed here, apart from the frames.
        t0 = time.perf_counter()
        with torch.inference_mode():
            compiled(x)
        sync()
        setup_ms = (time.perf_counter() - t0) * 1e3
    else:
        forward = lambda inp, s: timed_forward(model, inp, s)  # noqa: E731
    rss_before = rss_mib()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    times = []
    alpha = fg = None
    for i in range(a.warmup + a.frames):
        with torch.inference_mode():
            alpha, fg, t = forward(x, sync)
        if i >= a.warmup:
            times.append(t)
    med = [statistics.median(s) for s in zip(*times)]
    if a.variant == "reference-compile":
        setup_ms = max(0.0, setup_ms - med[3])  # the first call also ran one frame
    if a.output:
        torch.save({"alpha": alpha.float().cpu().contiguous(), "fg": fg.float().cpu().contiguous()},
                   a.output)
    print(json.dumps({
        "variant": a.variant,
        "precision": str(dtype).replace("torch.", ""),
        "channels_last": channels_last,
        "threads": torch.get_num_threads(),
        "timm": gr.timm.__version__,
        "runtime": runtime,
        # Conversion (OpenVINO) or compiling (torch.compile), before and apart from the frames.
        "setup_ms": setup_ms,
        "torch": torch.__version__,
        "encoder_ms": med[0], "decoders_ms": med[1], "refiner_ms": med[2], "median_ms": med[3],
        "min_ms": min(t[3] for t in times), "max_ms": max(t[3] for t in times),
        "peak_rss_mib": peak_rss_mib(), "rss_growth_mib": max(0.0, peak_rss_mib() - rss_before),
        # Device memory over the timed forwards (weights included), as the engine reports it.
        "cuda_peak_allocated_mib": (torch.cuda.max_memory_allocated(dev) / 2**20
                                    if dev.type == "cuda" else 0.0),
        "cuda_peak_reserved_mib": (torch.cuda.max_memory_reserved(dev) / 2**20
                                   if dev.type == "cuda" else 0.0),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
