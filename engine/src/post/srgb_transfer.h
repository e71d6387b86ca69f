// The sRGB transfer function (IEC 61966-2-1), the reference's piecewise form, on single
// samples and on whole rows. The power segment is computed without libm: a log2 / exp2
// pair in double precision whose polynomials are accurate to ~1e-14, rounded once to float,
// so the power is within 1 ulp of glibc's powf (tests/unit/test_srgb_transfer.cpp checks
// 18M samples from 0 to 32768). Decoding is within 1 ulp of the reference's formula;
// encoding within 4 ulp (1.2e-7 absolute on [0, 1]), where 1.055 p - 0.055 cancels. The
// row forms are compiled for AVX-512, AVX2 and baseline x86-64, the widest one this CPU
// runs picked at first use; the file is built with -ffp-contract=off, so every variant and
// the single-sample form give the same bits. Why: a std::pow per sample was 12.4 M calls at
// ~13 ns for a 1920x1080 frame's processed + comp, most of a frame.repost (issue 21).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace corridorkey::post {

/// x <= 0.04045 ? x / 12.92 : ((x + 0.055) / 1.055)^2.4; negative input is 0; NaN stays NaN.
float srgb_to_linear(float x);
/// x <= 0.0031308 ? x * 12.92 : 1.055 x^(1/2.4) - 0.055; negative input is 0; inf stays inf.
float linear_to_srgb(float x);

/// In place over n contiguous samples; the same bits as the single-sample forms.
void srgb_to_linear_inplace(float* v, std::size_t n);
void linear_to_srgb_inplace(float* v, std::size_t n);

/// The row variants this CPU runs, widest first: "x86-64-v4", "x86-64-v3", "baseline" (the
/// in-place forms above run the first). Each must give the single-sample bits; the tests
/// check every one the CPU has, not only the widest.
std::vector<std::string> transfer_row_variants();
/// Runs one named variant over a row (decode when to_linear, else encode); false when this
/// CPU does not run it or the name is unknown.
bool transfer_rows_with(const std::string& variant, bool to_linear, float* v, std::size_t n);

}  // namespace corridorkey::post
