#include "functional.h"

#include "attention_cpu.h"
#include "attention_f32_cpu.h"

#include <ATen/Context.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/InferenceMode.h>
#include <ATen/core/stack.h>

#include <atomic>
#include <optional>
#include <string>

namespace corridorkey::model::functional {

namespace {
thread_local bool t_onednn_linear = false;

/// LibTorch's oneDNN linear, called boxed (its C++ signature is internal; the schema is
/// "mkldnn::_linear_pointwise(Tensor X, Tensor W, Tensor? B, str attr, Scalar?[] scalars,
/// str? algorithm) -> Tensor"). nullptr when this LibTorch was built without oneDNN.
const c10::OperatorHandle* onednn_op() {
  static const std::optional<c10::OperatorHandle> op =
      c10::Dispatcher::singleton().findSchema({"mkldnn::_linear_pointwise", ""});
  return op ? &*op : nullptr;
}

std::atomic<uint64_t> g_onednn_calls{0};

/// float32 only as IEEE float32: LibTorch's oneDNN linear follows the process-wide float32
/// matmul precision (a host's set_float32_matmul_precision("medium") makes it bf16), which
/// MKL's path does not, so then it stays off. No autograd: the op has no backward.
bool use_onednn(const torch::Tensor& x) {
  if (!t_onednn_linear || x.scalar_type() != torch::kFloat || !x.device().is_cpu() ||
      x.requires_grad() || onednn_op() == nullptr)
    return false;
  if (!c10::InferenceMode::is_enabled() && at::GradMode::is_enabled()) return false;
  const auto p = at::globalContext().float32Precision(at::Float32Backend::MKLDNN, at::Float32Op::MATMUL);
  return p != at::Float32Precision::TF32 && p != at::Float32Precision::BF16 &&
         p != at::Float32Precision::BF16X9;
}

torch::Tensor onednn_linear(const torch::nn::Linear& m, const torch::Tensor& x, bool gelu) {
  torch::jit::Stack s;
  s.reserve(6);
  s.emplace_back(x);
  s.emplace_back(m->weight);
  s.emplace_back(m->bias.defined() ? c10::IValue(m->bias) : c10::IValue());
  s.emplace_back(std::string(gelu ? "gelu" : "none"));
  s.emplace_back(c10::List<std::optional<at::Scalar>>());
  s.emplace_back(gelu ? c10::IValue(std::string("none")) : c10::IValue(std::string("")));
  onednn_op()->callBoxed(s);
  g_onednn_calls.fetch_add(1, std::memory_order_relaxed);
  return s.back().toTensor();
}
}  // namespace

OnednnLinearScope::OnednnLinearScope(bool on) : previous_(t_onednn_linear) { t_onednn_linear = on; }
OnednnLinearScope::~OnednnLinearScope() { t_onednn_linear = previous_; }
bool onednn_linear_available() { return onednn_op() != nullptr; }
bool onednn_linear_active(const torch::Tensor& x) { return use_onednn(x); }
uint64_t onednn_linear_calls() { return g_onednn_calls.load(std::memory_order_relaxed); }

torch::Tensor linear(const torch::nn::Linear& m, const torch::Tensor& x) {
  if (use_onednn(x)) return onednn_linear(m, x, false);
  return at::linear(x, m->weight, m->bias);
}

torch::Tensor linear_gelu(const torch::nn::Linear& m, const torch::Tensor& x) {
  if (use_onednn(x)) return onednn_linear(m, x, true);
  auto h = at::linear(x, m->weight, m->bias);
  return at::gelu_(h);  // exact erf GELU, as timm's nn.GELU; in place (no extra allocation)
}

torch::Tensor unroll(const torch::Tensor& x, int64_t height, int64_t width, int64_t levels,
                     int64_t sy, int64_t sx) {
  const int64_t C = x.size(-1);
  int64_t b = x.size(0), h = height, w = width;
  auto t = x.view({b, h, w, C});
  for (int64_t l = 0; l < levels; ++l) {
    h /= sy;
    w /= sx;
    // [b, h, sy, w, sx, C] -> [b, sy, sx, h, w, C] -> fold (sy, sx) into the batch.
    t = t.view({b, h, sy, w, sx, C}).permute({0, 2, 4, 1, 3, 5}).flatten(0, 2);
    b *= sy * sx;
  }
  return t.reshape({-1, height * width, C});
}

torch::Tensor reroll(const torch::Tensor& x, int64_t height, int64_t width, int64_t levels,
                     int64_t sy, int64_t sx) {
  const int64_t B = x.size(0), C = x.size(-1);
  int64_t N = x.size(1), mh = 1, mw = 1;
  auto t = x;
  for (int64_t l = 0; l < levels; ++l) {
    // Pull the outermost (sy, sx) sub-grid out of N and merge it into the mask unit.
    t = t.view({B, sy, sx, N / (sy * sx), mh, mw, C}).permute({0, 3, 1, 4, 2, 5, 6});
    mh *= sy;
    mw *= sx;
    t = t.reshape({B, -1, mh, mw, C});
    N = t.size(1);
  }
  // Undo windowing: [B, #MU, mh, mw, C] -> [B, H/mh, mh, W/mw, mw, C] -> [B, H, W, C].
  t = t.view({B, height / mh, width / mw, mh, mw, C}).permute({0, 1, 3, 2, 4, 5});
  return t.reshape({B, height, width, C});
}

torch::Tensor unrolled_positions(int64_t height, int64_t width, int64_t levels, int64_t sy,
                                 int64_t sx) {
  auto idx = torch::arange(height * width, torch::kLong).view({1, height * width, 1});
  return unroll(idx, height, width, levels, sy, sx).view({height * width});
}

namespace {

/// The float32 kernel straight on the qkv projection's output (attention_f32_cpu.h): q, k
/// and v are read where they lie in [B, T, windows, 3, heads, d] (token n = t * windows + w,
/// window fastest, as timm orders mask units; windows = 1 is global attention) and the
/// output is written as [B, Tq * windows, heads * d], the order the projection reads. Only
/// a pooled q (q_stride > 1) is materialised, a quarter of q. Undefined when it does not apply.
torch::Tensor native_f32(const torch::Tensor& qkv, int64_t heads, int64_t nw, int64_t q_stride) {
  const int64_t B = qkv.size(0), N = qkv.size(1), d = qkv.size(-1) / (3 * heads);
  const int64_t T = N / nw, Tq = T / q_stride, row = 3 * heads * d;
  kernels::AttentionF32Shape shape{B, nw, heads, Tq, T, d};
  if (qkv.scalar_type() != torch::kFloat || !qkv.device().is_cpu() || !qkv.is_contiguous() ||
      !kernels::native_attention_f32_supported(shape) || !kernels::native_attention_f32_available())
    return {};
  const float* base = qkv.data_ptr<float>();
  kernels::AttentionF32View q{base, N * row, row, d, nw * row};
  torch::Tensor pooled;
  if (q_stride > 1) {
    // timm: q.view(B, heads, nw, q_stride, Tq, d).amax(3), sub-token t = j * Tq + i. Here
    // the same maximum comes out as [B, Tq, nw, heads, d] (contiguous), read by strides.
    pooled = qkv.view({B, q_stride, Tq, nw, 3, heads, d}).select(4, 0).amax(1);
    q = {pooled.data_ptr<float>(), Tq * nw * heads * d, heads * d, d, nw * heads * d};
  }
  auto out = torch::empty({B, Tq * nw, heads * d}, qkv.options());
  kernels::native_attention_f32(shape, q, {base + heads * d, N * row, row, d, nw * row},
                                {base + 2 * heads * d, N * row, row, d, nw * row},
                                {out.data_ptr<float>(), Tq * nw * heads * d, heads * d, d, nw * heads * d});
  return out;
}

}  // namespace

torch::Tensor mask_unit_attention(const torch::Tensor& qkv, int64_t heads, int64_t num_windows,
                                  int64_t q_stride, bool four_d, const torch::Tensor& attn_mask,
                                  bool native) {
  const auto mask = attn_mask.defined() ? std::optional<at::Tensor>(attn_mask) : std::nullopt;
  const int64_t B = qkv.size(0);
  const int64_t d = qkv.size(-1) / (3 * heads);
  if (native && !mask && qkv.scalar_type() == torch::kFloat) {
    if (auto o = native_f32(qkv, heads, num_windows, q_stride); o.defined()) return o;
  }
  if (four_d && num_windows == 1) {
    // [B, N, 3, H, d] -> [3, B, H, N, d]; each of q, k, v made contiguous 4-D.
    auto t = qkv.view({B, -1, 3, heads, d}).permute({2, 0, 3, 1, 4});
    auto q = t[0], k = t[1].contiguous(), v = t[2].contiguous();
    if (q_stride > 1) {
      q = q.view({B, heads, q_stride, -1, d}).amax(2);
    }
    q = q.contiguous();
    const bool use_native = native && !mask && kernels::native_attention_supported(q, k, v) &&
                            kernels::native_attention_available();
    auto o = use_native ? kernels::native_attention_bf16(q, k, v)
                        : at::scaled_dot_product_attention(q, k, v, mask);
    return o.transpose(1, 2).reshape({B, -1, heads * d});  // [B, Nq, H*d]
  }
  // timm layout: token n = t * num_windows + w (window index fastest).
  auto t = qkv.reshape({B, -1, num_windows, 3, heads, d}).permute({3, 0, 4, 2, 1, 5});
  auto qkv3 = t.unbind(0);
  auto q = qkv3[0];
  if (q_stride > 1) {
    q = q.view({B, heads, num_windows, q_stride, -1, d}).amax(3);
  }
  auto o = at::scaled_dot_product_attention(
      q, qkv3[1], qkv3[2], mask ? std::optional<at::Tensor>(mask->unsqueeze(2)) : std::nullopt);
  return o.transpose(1, 3).reshape({B, -1, heads * d});
}

}  // namespace corridorkey::model::functional
