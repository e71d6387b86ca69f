// Native bf16 attention for CPUs with AVX-512 BF16 (vdpbf16ps): softmax(q k^T / sqrt(d)) v
// in one pass over the keys (online softmax, as flash attention), with q k^T and p v as
// bf16 dot products accumulated in float32 and the softmax in float32.
//
// Why: the global-attention blocks (6-23) are ~45% of a CPU frame in bf16, and LibTorch's
// CPU flash kernel runs bf16 at its float32 speed on CPUs without AMX (176 ms per stage-3
// block at 1024 on a 2-core AVX-512 BF16 EPYC, fp32 178 ms). Measured gains and the routing
// rule are in docs/performance.md; `bench --ops` shows which kernel ran.
//
// Numerics: q k^T exact products of bf16 values summed in float32; probabilities rounded to
// bf16 for p v (as bf16 flash kernels do); output rounded to bf16. Against float32 SDPA on
// the same bf16 inputs the error is of the order of bf16 rounding (test_kernels.cpp bounds
// it beside LibTorch's own bf16 kernel's error).
#pragma once

#include <torch/types.h>

namespace corridorkey::kernels {

/// True when the CPU has AVX-512 BF16 and the kernel passed its start-up self-test (run
/// once, on small odd-sized problems, against float32 SDPA).
bool native_attention_available();

/// True for inputs the kernel takes: CPU bfloat16, 4-D [B, H, N, d] contiguous, the same
/// B, H and d, even d <= 256, keys and values of the same length.
bool native_attention_supported(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v);

/// softmax(q k^T * d^-0.5) v: q [B, H, Nq, d], k and v [B, H, Nk, d] -> [B, H, Nq, d] bf16.
torch::Tensor native_attention_bf16(const torch::Tensor& q, const torch::Tensor& k,
                                    const torch::Tensor& v);

}  // namespace corridorkey::kernels
