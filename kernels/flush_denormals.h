// Flush-to-zero and denormals-are-zero on the current thread for one scope of kernel work,
// the caller's floating-point mode restored when it ends.
//
// Why: in the float32 kernel (attention_f32_cpu.cpp) a key far below its row's best gets the
// exp floor, 2^-126, and that probability times a value below 1 is subnormal, as is the
// running sum it starts. Intel cores compute a subnormal result or operand by a microcode
// assist of hundreds of cycles (Intel's oneMKL guide, "Operating on denormals"). The 2-core
// Zen 5 VM shows no such cost: a stage-3 problem (8 heads x 4096 tokens, d 56) took 97-111
// ms with and without this guard, whether or not its q and k were scaled 8x so that most
// probabilities underflow. No Intel core was at hand to time it there. Trained weights can
// give such peaky rows; the random ones bench uses do not. The bf16 kernel's floor is
// e^-87 (1.6e-38, normal) and its products run in vdpbf16ps, which flushes by itself; there
// the guard covers only the float32 rescales of a row's sums (o * alpha, o / l).
// Numerical effect: every product or partial sum below 2^-126 in magnitude becomes 0, so an
// output moves by at most nk x 2^-126 in absolute terms (below 5e-35 at 4096 keys).
// The mode is per thread (MXCSR), so each parallel task sets and restores its own; nothing
// outside the kernel (LibTorch ops, the host's code) runs under it.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace corridorkey::kernels {

class FlushDenormalsScope {
 public:
#if defined(__x86_64__) || defined(__i386__)
  static constexpr unsigned kFtzDaz = 0x8040u;  // MXCSR bit 15 (FTZ) and bit 6 (DAZ)
  FlushDenormalsScope() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | kFtzDaz); }
  ~FlushDenormalsScope() { _mm_setcsr(saved_); }

 private:
  unsigned saved_;
#else
  FlushDenormalsScope() = default;
#endif

 public:
  FlushDenormalsScope(const FlushDenormalsScope&) = delete;
  FlushDenormalsScope& operator=(const FlushDenormalsScope&) = delete;
};

}  // namespace corridorkey::kernels
