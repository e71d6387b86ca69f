#include "sample_input.h"

#include <ATen/CPUGeneratorImpl.h>

namespace corridorkey::model {

torch::Tensor seeded_input(int64_t batch, int64_t size, uint64_t seed, double band_area) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto rgb = at::rand({batch, 3, size, size}, gen, torch::kFloat);
  auto mean = torch::tensor({0.485f, 0.456f, 0.406f}).view({1, 3, 1, 1});
  auto stdv = torch::tensor({0.229f, 0.224f, 0.225f}).view({1, 3, 1, 1});
  rgb = (rgb - mean) / stdv;
  // Disc of radius 0.3*size with a soft edge, centre jittered by the seed.
  auto c = at::rand({2}, gen, torch::kFloat) * 0.2 + 0.4;
  auto coords = (torch::arange(size, torch::kFloat) + 0.5) / static_cast<double>(size);
  auto dy = coords.view({size, 1}) - c[0];
  auto dx = coords.view({1, size}) - c[1];
  auto r = torch::sqrt(dy * dy + dx * dx);
  // Ring of radius 0.3 and width w covers 2*pi*0.3*w of the (unit) frame.
  const double w = band_area > 0 ? band_area / (2 * 3.14159265358979 * 0.3) : 0.08;
  auto hint = torch::clamp((0.3 - r) / w + 0.5, 0.0, 1.0);
  hint = hint.view({1, 1, size, size}).expand({batch, 1, size, size});
  return torch::cat({rgb, hint}, 1).contiguous();
}

}  // namespace corridorkey::model
