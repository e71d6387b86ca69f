#include "post/srgb_transfer.h"

#include <cmath>
#include <cstdint>
#include <cstring>

// Built with -ffp-contract=off (CMakeLists.txt): no fused multiply-adds but the explicit
// std::fma calls, so the AVX-512, AVX2 and baseline variants below round every operation
// alike and give the same bits. The variant is picked once by __builtin_cpu_supports, not
// by target_clones: GCC exports target_clones' ifunc symbols whatever the visibility (the
// library must export its API alone), and their resolvers crashed sanitizer builds.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(CK_TRANSFER_BASELINE_ONLY)
#define CK_TRANSFER_VARIANTS 1
#endif

namespace corridorkey::post {
namespace {

constexpr double kLn2 = 0.69314718055994530942;
constexpr double kRound = 6755399441055744.0;  // 1.5 * 2^52: (y + k) - k rounds y to nearest

inline uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
inline float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
inline double double_of(uint64_t u) {
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

/// x^p for a positive normal float x, in double, rounded once to float. Branch-free, so the
/// row loops vectorise. log2 x = e + 2/ln2 atanh(t), t = (m-1)/(m+1) with m in [1/sqrt2,
/// sqrt2): |t| <= 0.1716, and the series to t^13 leaves < 5e-13 relative. 2^f for
/// |f| <= ln2/2 from exp's series to degree 9: < 1e-11. Both far below a float's 6e-8. Zero, denormal, inf and NaN inputs give a finite
/// number that the callers replace (they select the linear segment or pass x through).
inline float pow_positive(float x, double p) {
  const uint32_t u = bits_of(x);
  const int e = static_cast<int>(u >> 23) - 127;
  double m = static_cast<double>(float_of((u & 0x007fffffu) | 0x3f800000u));  // [1, 2)
  const bool upper = m > 1.4142135623730951;
  m = upper ? m * 0.5 : m;
  const double ed = static_cast<double>(e) + (upper ? 1.0 : 0.0);
  const double t = (m - 1.0) / (m + 1.0), t2 = t * t;
  // Horner steps as explicit fused multiply-adds: one instruction in the AVX2 / AVX-512
  // variants, libm's exactly rounded fma() in the baseline one, so all give the same bits.
  double s = 1.0 / 13;
  s = std::fma(s, t2, 1.0 / 11);
  s = std::fma(s, t2, 1.0 / 9);
  s = std::fma(s, t2, 1.0 / 7);
  s = std::fma(s, t2, 1.0 / 5);
  s = std::fma(s, t2, 1.0 / 3);
  s = std::fma(s, t2, 1.0);
  double y = p * (ed + (2.0 / kLn2) * (t * s));
  y = y > -1100.0 ? y : -1100.0;  // also maps NaN to a finite value before the int cast
  y = y < 1100.0 ? y : 1100.0;
  const double n = (y + kRound) - kRound;
  const double f = (y - n) * kLn2;  // |f| <= ln2 / 2
  double q = 1.0 / 362880;          // 1/9!
  q = std::fma(q, f, 1.0 / 40320);
  q = std::fma(q, f, 1.0 / 5040);
  q = std::fma(q, f, 1.0 / 720);
  q = std::fma(q, f, 1.0 / 120);
  q = std::fma(q, f, 1.0 / 24);
  q = std::fma(q, f, 1.0 / 6);
  q = std::fma(q, f, 0.5);
  q = std::fma(q, f, 1.0);
  q = std::fma(q, f, 1.0);
  int ni = static_cast<int>(n);
  ni = ni > -1022 ? ni : -1022;  // beyond float's range either way: 0 or inf below
  ni = ni < 1023 ? ni : 1023;
  const double scale = double_of(static_cast<uint64_t>(static_cast<int64_t>(ni + 1023)) << 52);
  return static_cast<float>(q * scale);
}

inline bool finite_bits(float x) { return (bits_of(x) & 0x7f800000u) != 0x7f800000u; }

inline float to_linear_one(float x) {
  x = x < 0.f ? 0.f : x;  // std::max(x, 0.f): NaN stays NaN
  const float lin = x / 12.92f;
  const float pw = pow_positive((x + 0.055f) / 1.055f, static_cast<double>(2.4f));
  const float r = x <= 0.04045f ? lin : pw;
  return finite_bits(x) ? r : x;
}

inline float to_srgb_one(float x) {
  x = x < 0.f ? 0.f : x;  // std::max(x, 0.f): NaN stays NaN
  const float lin = x * 12.92f;
  const float pw = 1.055f * pow_positive(x, static_cast<double>(1.f / 2.4f)) - 0.055f;
  const float r = x <= 0.0031308f ? lin : pw;
  return finite_bits(x) ? r : x;
}

}  // namespace

float srgb_to_linear(float x) { return to_linear_one(x); }
float linear_to_srgb(float x) { return to_srgb_one(x); }

namespace {
template <float (*One)(float)>
inline void rows(float* v, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) v[i] = One(v[i]);
}
using RowFn = void (*)(float*, std::size_t);
#ifdef CK_TRANSFER_VARIANTS
__attribute__((target("arch=x86-64-v4"))) void to_linear_v4(float* v, std::size_t n) { rows<to_linear_one>(v, n); }
__attribute__((target("arch=x86-64-v3"))) void to_linear_v3(float* v, std::size_t n) { rows<to_linear_one>(v, n); }
__attribute__((target("arch=x86-64-v4"))) void to_srgb_v4(float* v, std::size_t n) { rows<to_srgb_one>(v, n); }
__attribute__((target("arch=x86-64-v3"))) void to_srgb_v3(float* v, std::size_t n) { rows<to_srgb_one>(v, n); }
#endif
void to_linear_base(float* v, std::size_t n) { rows<to_linear_one>(v, n); }
void to_srgb_base(float* v, std::size_t n) { rows<to_srgb_one>(v, n); }

bool cpu_runs_v4() {
#ifdef CK_TRANSFER_VARIANTS
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}
bool cpu_runs_v3() {
#ifdef CK_TRANSFER_VARIANTS
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2");
#else
  return false;
#endif
}

#ifdef CK_TRANSFER_VARIANTS
/// The widest variant this CPU runs (x86-64-v4: AVX-512 F/BW/DQ/VL; v3: AVX2 + FMA).
RowFn pick(RowFn v4, RowFn v3, RowFn base) {
  if (cpu_runs_v4()) return v4;
  if (cpu_runs_v3()) return v3;
  return base;
}
#endif
}  // namespace

std::vector<std::string> transfer_row_variants() {
  std::vector<std::string> out;
  if (cpu_runs_v4()) out.push_back("x86-64-v4");
  if (cpu_runs_v3()) out.push_back("x86-64-v3");
  out.push_back("baseline");
  return out;
}

bool transfer_rows_with(const std::string& variant, bool to_linear, float* v, std::size_t n) {
  RowFn fn = nullptr;
  if (variant == "baseline") fn = to_linear ? to_linear_base : to_srgb_base;
#ifdef CK_TRANSFER_VARIANTS
  if (variant == "x86-64-v4" && cpu_runs_v4()) fn = to_linear ? to_linear_v4 : to_srgb_v4;
  if (variant == "x86-64-v3" && cpu_runs_v3()) fn = to_linear ? to_linear_v3 : to_srgb_v3;
#endif
  if (!fn) return false;
  fn(v, n);
  return true;
}

void srgb_to_linear_inplace(float* v, std::size_t n) {
#ifdef CK_TRANSFER_VARIANTS
  static const RowFn fn = pick(to_linear_v4, to_linear_v3, to_linear_base);
#else
  static const RowFn fn = to_linear_base;
#endif
  fn(v, n);
}

void linear_to_srgb_inplace(float* v, std::size_t n) {
#ifdef CK_TRANSFER_VARIANTS
  static const RowFn fn = pick(to_srgb_v4, to_srgb_v3, to_srgb_base);
#else
  static const RowFn fn = to_srgb_base;
#endif
  fn(v, n);
}

}  // namespace corridorkey::post
