// Native float32 attention for x86-64 CPUs with AVX2 + FMA: softmax(q k^T / sqrt(d)) v in one
// pass over the keys (online softmax, as flash attention), reading q, k and v where they lie
// and writing the output where the next layer wants it, through strides.
//
// Why: on a CPU without fast bf16 the float32 path is the one that runs, and there
//  - LibTorch's CPU flash kernel runs a global block's attention at ~55% of the machine's
//    sgemm rate (a stage-3 block at 1024: 8 heads x 4096 tokens x d 56, 30 GFLOP);
//  - Hiera's mask-unit (windowed) blocks 0-5 go through SDPA's 5-D math path: a permuted
//    copy of q, k and v, two bmm, a softmax and a copy back, for windows of 64 tokens.
// Hiera keeps q, k and v interleaved in the qkv projection's output ([B, N, 3, H, d], window
// fastest in N). The kernel takes that layout as strides, so neither path copies anything:
// one read of qkv, one write of the output in [B, N, H*d] order.
//
// Numerics: every product and sum in float32; exp by a degree-6 polynomial within 2 ulp of
// expf (LibTorch's own CPU kernel uses exp_u20); the summation order differs from SDPA's, so
// results match it to float32 rounding (test_kernels.cpp bounds it against the math path in
// float64). Measured wins and the routing rule: docs/performance.md.
#pragma once

#include <cstdint>
#include <string>

namespace corridorkey::kernels {

/// One attention problem over three batch-like dimensions (batch, window, head) and a
/// sequence dimension, every one strided in elements; the feature dimension d is contiguous.
struct AttentionF32View {
  const float* data;
  int64_t s_batch, s_window, s_head, s_seq;
};
struct AttentionF32Out {
  float* data;
  int64_t s_batch, s_window, s_head, s_seq;
};
struct AttentionF32Shape {
  int64_t batch = 1, windows = 1, heads = 1, nq = 0, nk = 0, d = 0;
};

/// True when the CPU has AVX2 and FMA and the kernel passed its start-up self-test (run
/// once, on small odd-sized problems, against a float64 reference).
bool native_attention_f32_available();

/// The variant that runs: "avx512" (16 lanes) where it passes its self-test, else "avx2"
/// (8 lanes), else "none". Fixed per machine, never timed per process: the variants sum a
/// softmax row in different orders, and two processes on one machine must give the same
/// bits. Whether the kernel runs at all is the measured plan's trial against SDPA.
std::string native_attention_f32_isa();

/// Both variants timed on a 4-head, 1024-token, d 56 problem (median of 3), e.g.
/// "avx512 9.2 ms, avx2 14.8 ms"; empty where only one runs. For tests and reports.
std::string native_attention_f32_timing();

/// Tests and benchmarks: run "avx2" or "avx512" from now on ("auto" restores the timed
/// choice). False, changing nothing, when that variant is not available here.
bool native_attention_f32_use_isa(const std::string& isa);

/// Shapes the kernel takes: d a multiple of 8 up to 256, nq and nk >= 1.
bool native_attention_f32_supported(const AttentionF32Shape& s);

/// Calls of native_attention_f32 so far in this process (tests: proof that a path ran).
uint64_t native_attention_f32_calls();

/// out = softmax(q k^T * d^-0.5) v for every (batch, window, head); parallel over LibTorch's
/// intra-op threads. Throws std::invalid_argument for an unsupported shape.
void native_attention_f32(const AttentionF32Shape& s, const AttentionF32View& q,
                          const AttentionF32View& k, const AttentionF32View& v,
                          const AttentionF32Out& out);

}  // namespace corridorkey::kernels
