#include "random_weights.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

namespace corridorkey::model {
namespace {
bool ends_with(const std::string& s, const std::string& x) {
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}
}  // namespace

void randomize_weights(GreenFormerImpl& net, uint64_t seed) {
  torch::NoGradGuard ng;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto normal = [&](const torch::Tensor& t, double mean, double std) {
    t.copy_(at::normal(mean, std, t.sizes(), gen, torch::TensorOptions().dtype(torch::kFloat)));
  };
  for (auto& p : net.named_parameters(true)) {
    const auto& k = p.key();
    auto& t = p.value();
    if (k == "encoder.model.pos_embed") {
      normal(t, 0, 0.5);
    } else if (k.rfind("refiner.final.", 0) == 0) {
      normal(t, 0, 0.01);
    } else if (t.dim() >= 2) {
      const double fan_in = static_cast<double>(t[0].numel());
      const bool residual_out = ends_with(k, "attn.proj.weight") || ends_with(k, "mlp.fc2.weight");
      normal(t, 0, (residual_out ? 0.5 : 1.0) / std::sqrt(fan_in));
    } else if (ends_with(k, ".weight")) {
      normal(t, 1.0, 0.1);  // LayerNorm / GroupNorm / BatchNorm scale
    } else {
      normal(t, 0.0, 0.02);
    }
  }
  for (auto& b : net.named_buffers(true)) {
    if (ends_with(b.key(), "running_mean")) normal(b.value(), 0, 0.1);
    if (ends_with(b.key(), "running_var"))
      b.value().copy_(at::rand(b.value().sizes(), gen, torch::TensorOptions()) + 0.5);
  }
}

}  // namespace corridorkey::model
