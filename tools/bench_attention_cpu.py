#!/usr/bin/env python3
"""Global attention on a CPU in float32: LibTorch's flash SDPA against chunked explicit
softmax(Q K^T) V (two large GEMMs per query chunk), at GreenFormer's global-attention shapes
(hiera_base_plus: stage 3 = 8 heads x (S/16)^2 tokens, stage 4 = 16 heads x (S/32)^2; head
dim 56). docs/performance.md (the Zen 3 section) quotes it: on a 2-core Zen 3 VM, flash 325 ms against
1105 ms for chunked at 1024's stage 3, so the explicit form is no way to a faster fp32 path.

  python tools/bench_attention_cpu.py [--threads 2]

Prints the best of a few runs per shape and the max abs difference between the two.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

SHAPES = ((8, 4096, 56), (16, 1024, 56), (8, 16384, 56))  # 1024 stage 3, 4; 2048 stage 3


def best_ms(f, reps: int) -> float:
    f()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def chunked(q, k, v, rows: int):
    out = torch.empty_like(q)
    kt = k.transpose(-2, -1)
    scale = q.shape[-1] ** -0.5
    for s in range(0, q.shape[2], rows):
        p = torch.softmax(torch.matmul(q[:, :, s:s + rows] * scale, kt), -1)
        torch.matmul(p, v, out=out[:, :, s:s + rows])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    with torch.inference_mode():
        for heads, n, d in SHAPES:
            q, k, v = (torch.randn(1, heads, n, d) for _ in range(3))
            reps = 2 if n > 8000 else 3
            diff = (chunked(q, k, v, 1024) - F.scaled_dot_product_attention(q, k, v)).abs().max().item()
            tf = best_ms(lambda: F.scaled_dot_product_attention(q, k, v), reps)
            tc = best_ms(lambda: chunked(q, k, v, 1024), reps)
            print(f"heads {heads} tokens {n} d {d}: flash {tf:.0f} ms, chunked (1024 rows) {tc:.0f} ms, "
                  f"max diff {diff:.2e}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
