#include "conv.h"

#include "winograd_conv_cpu.h"

#include <ATen/autocast_mode.h>
#include <ATen/core/grad_mode.h>

#include <variant>
#include <vector>

namespace corridorkey::model::functional {
namespace {
thread_local bool t_winograd = false;

/// m's padding when it is one number per side (not "same" / "valid"), else -1.
int64_t padding_of(const torch::nn::detail::ConvNdOptions<2>& o) {
  const auto* p = std::get_if<torch::ExpandingArray<2>>(&o.padding());
  if (p == nullptr || (*p)->at(0) != (*p)->at(1)) return -1;
  return (*p)->at(0);
}
}  // namespace

WinogradConvScope::WinogradConvScope(bool on) : previous_(t_winograd) { t_winograd = on; }
WinogradConvScope::~WinogradConvScope() { t_winograd = previous_; }
bool winograd_conv_available() { return kernels::winograd_conv_f32_available(); }

const char* winograd_refiner_unavailable(bool channels_last, int64_t channels) {
  if (!winograd_conv_available()) return "the Winograd kernel needs AVX2 + FMA and its self-test, which this CPU lacks";
  if (!channels_last) return "needs channels_last";
  if (!kernels::winograd_conv_f32_supported(channels, channels)) return "refiner_channels is not a multiple of 16";
  return nullptr;
}

bool winograd_conv_active(const torch::nn::Conv2d& m, const torch::Tensor& x) {
  if (!t_winograd || !x.defined() || x.dim() != 4 || x.scalar_type() != torch::kFloat || !x.device().is_cpu())
    return false;
  const auto& o = m->options;
  const auto& w = m->weight;
  const auto& b = m->bias;
  // at::conv2d would record autograd history or autocast to bf16 here: not this path's meaning.
  if (at::GradMode::is_enabled() && (x.requires_grad() || w.requires_grad() || (b.defined() && b.requires_grad())))
    return false;
  if (at::autocast::is_autocast_enabled(at::kCPU)) return false;
  if (!w.device().is_cpu() || (b.defined() && (!b.device().is_cpu() || b.scalar_type() != torch::kFloat ||
                                               b.numel() != w.size(0))))
    return false;
  if (w.scalar_type() != torch::kFloat || w.dim() != 4 || w.size(2) != 3 || w.size(3) != 3 || o.groups() != 1 ||
      o.stride()->at(0) != 1 || o.stride()->at(1) != 1 || o.dilation()->at(0) != o.dilation()->at(1) ||
      !std::holds_alternative<torch::enumtype::kZeros>(o.padding_mode()) || padding_of(o) < 0)
    return false;
  if (!kernels::winograd_conv_f32_supported(w.size(1), w.size(0)) || x.size(1) != w.size(1)) return false;
  return x.is_contiguous(at::MemoryFormat::ChannelsLast) && winograd_conv_available();
}

torch::Tensor conv2d(const torch::nn::Conv2d& m, const torch::Tensor& x, int64_t pad) {
  const auto& o = m->options;
  const int64_t p = pad >= 0 ? pad : padding_of(o);
  const int64_t d = o.dilation()->at(0);
  const int64_t ho = x.dim() == 4 ? x.size(2) + 2 * p - 2 * d : 0, wo = x.dim() == 4 ? x.size(3) + 2 * p - 2 * d : 0;
  if (p < 0 || ho < 1 || wo < 1 || !winograd_conv_active(m, x)) {
    if (pad < 0) return m.ptr()->forward(x);
    return at::conv2d(x, m->weight, m->bias, o.stride(), std::vector<int64_t>{pad, pad}, o.dilation(), o.groups());
  }
  const int64_t cout = m->weight.size(0), cin = m->weight.size(1);
  // The transformed filters cost ~0.1 ms for 64 x 64: made per call, so a Model shared by
  // engines holds no second copy of its weights.
  auto u = torch::empty({16, cin, cout}, x.options());
  const auto w = m->weight.contiguous();
  kernels::winograd_weights_f32(w.data_ptr<float>(), cout, cin, u.data_ptr<float>());
  const auto bias = m->bias.defined() ? m->bias.contiguous() : torch::Tensor();
  auto out = torch::empty({x.size(0), cout, ho, wo}, x.options().memory_format(at::MemoryFormat::ChannelsLast));
  kernels::WinogradConvF32 k;
  k.in = x.data_ptr<float>();
  k.n = x.size(0), k.h = x.size(2), k.w = x.size(3), k.cin = cin;
  k.weights = u.data_ptr<float>();
  k.bias = bias.defined() ? bias.data_ptr<float>() : nullptr;
  k.out = out.data_ptr<float>();
  k.cout = cout, k.dilation = d, k.pad = p;
  kernels::winograd_conv_f32(k);
  return out;
}

}  // namespace corridorkey::model::functional
