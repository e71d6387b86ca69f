// Flush-to-zero and denormals-are-zero on the current thread for one scope of kernel work,
// the caller's floating-point mode restored when it ends.
//
// Why: an attention row's softmax probabilities reach 2^-126 (the kernels' exp floor) for every
// key far below the row's best, and a probability times a value below 1 is subnormal. Intel
// cores compute a subnormal result or operand by a microcode assist of hundreds of cycles
// (Intel's oneMKL guide, "Operating on denormals"). The 2-core Zen 5 VM shows no such cost: a
// stage-3 problem (8 heads x 4096 tokens, d 56) took 97-111 ms with and without this guard,
// whether or not its q and k were scaled 8x so that most probabilities underflow. No Intel
// core was at hand to time it there. Trained weights can give such peaky rows; the random
// ones bench uses do not.
// Numerical effect: a subnormal (below 1.2e-38 in magnitude) becomes 0, an absolute change
// below 1.2e-38 in a sum whose largest term is at least 1: no float32 output changes unless
// it is itself subnormal.
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
