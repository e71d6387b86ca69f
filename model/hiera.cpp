#include "hiera.h"

#include <corridorkey/check.h>

#include "encoder_parts.h"
#include "functional.h"

#include <torch/nn/functional/activation.h>

#include <algorithm>
#include <atomic>
#include <chrono>

namespace corridorkey::model {
namespace F = torch::nn::functional;

namespace {
thread_local const std::array<bool, 4>* t_native_by_stage = nullptr;
std::atomic<EncoderPartTimes*> g_parts{nullptr};

/// f(), its wall time added to `part` of the running EncoderPartClock, if one runs and the
/// tensor `on` lives on the CPU (elsewhere the op would return before it is done).
template <class F>
torch::Tensor timed(double EncoderPartTimes::*part, const torch::Tensor& on, F&& f) {
  EncoderPartTimes* p = g_parts.load(std::memory_order_acquire);
  if (!p || !on.device().is_cpu()) return f();
  const auto t0 = std::chrono::steady_clock::now();
  auto y = f();
  p->*part += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ++p->calls;
  return y;
}
constexpr auto kLinear = &EncoderPartTimes::linear_ms;
}  // namespace

EncoderPartClock::EncoderPartClock(EncoderPartTimes& into) { g_parts.store(&into, std::memory_order_release); }
EncoderPartClock::~EncoderPartClock() { g_parts.store(nullptr, std::memory_order_release); }

NativeAttentionScope::NativeAttentionScope(const std::array<bool, 4>* by_stage)
    : previous_(t_native_by_stage) {
  t_native_by_stage = by_stage;
}
NativeAttentionScope::~NativeAttentionScope() { t_native_by_stage = previous_; }

MaskUnitAttentionImpl::MaskUnitAttentionImpl(const BlockSpec& spec) : spec_(spec) {
  qkv = register_module("qkv", torch::nn::Linear(spec.dim, 3 * spec.dim_out));
  proj = register_module("proj", torch::nn::Linear(spec.dim_out, spec.dim_out));
}

torch::Tensor MaskUnitAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& attn_mask) {
  const auto q = timed(kLinear, x, [&] { return functional::linear(qkv, x); });
  const auto o = core(q, attn_mask);
  return timed(kLinear, x, [&] { return functional::linear(proj, o); });
}

torch::Tensor MaskUnitAttentionImpl::core(const torch::Tensor& qkv_out, const torch::Tensor& attn_mask) {
  const int64_t N = qkv_out.size(1);
  const int64_t nw = spec_.mask_unit_attn ? N / (spec_.q_stride * spec_.window_size) : 1;
  const auto part = spec_.mask_unit_attn ? &EncoderPartTimes::windowed_attention_ms
                                         : &EncoderPartTimes::global_attention_ms;
  return timed(part, qkv_out, [&] {
    return functional::mask_unit_attention(qkv_out, spec_.heads, nw, spec_.q_stride, flash_4d && nw == 1,
                                           attn_mask,
                                           t_native_by_stage ? (*t_native_by_stage)[std::min<size_t>(stage, 3)]
                                                             : native_attention);
  });
}

MlpImpl::MlpImpl(int64_t dim, int64_t hidden) {
  fc1 = register_module("fc1", torch::nn::Linear(dim, hidden));
  fc2 = register_module("fc2", torch::nn::Linear(hidden, dim));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  // Exact erf GELU, as timm's nn.GELU: in place on fc1's output, or fc1's fused epilogue.
  // The GELU counts as linear time: it is fc1's epilogue where oneDNN fuses it.
  const auto h = timed(kLinear, x, [&] { return functional::linear_gelu(fc1, x); });
  return timed(kLinear, x, [&] { return functional::linear(fc2, h); });
}

HieraBlockImpl::HieraBlockImpl(const BlockSpec& s) {
  using torch::nn::LayerNormOptions;
  norm1 = register_module("norm1", torch::nn::LayerNorm(LayerNormOptions({s.dim}).eps(1e-6)));
  attn = register_module("attn", MaskUnitAttention(s));
  norm2 = register_module("norm2", torch::nn::LayerNorm(LayerNormOptions({s.dim_out}).eps(1e-6)));
  mlp = register_module("mlp", Mlp(s.dim_out, s.mlp_hidden));
  if (s.dim != s.dim_out) proj = register_module("proj", torch::nn::Linear(s.dim, s.dim_out));
}

torch::Tensor HieraBlockImpl::forward(torch::Tensor x, const torch::Tensor& attn_mask) {
  if (token_chunk > 0 && !proj && !attn_mask.defined() && x.dim() == 3 &&
      x.size(0) * x.size(1) > token_chunk && (chunk_always || chunk_pays(x.size(0) * x.size(1))))
    return forward_chunked(x);
  auto xn = norm1->forward(x);
  if (proj) {
    // Expanding block: the residual is the max-pool (in unrolled order) of proj(LN1 x).
    x = timed(kLinear, xn, [&] { return functional::linear(proj, xn); });
    x = x.view({x.size(0), spec().q_stride, -1, x.size(-1)}).amax(1);
  }
  x = x + attn->forward(xn, attn_mask);
  return x + mlp->forward(norm2->forward(x));
}

bool HieraBlockImpl::chunk_pays(int64_t rows) const {
  // Measured per block on a 2-core Zen 3 (float32, 512-row chunks, best of 6; docs/performance.md): the
  // narrow stages' GEMMs (K = 112, 224) stream their 4x-wide hidden rows through memory and
  // gain 30-35% at 1024 (stage 1: 591 -> 386 ms, stage 2: 356 -> 241 ms); a 448-wide block
  // gains only once its hidden map is far past the 32 MiB L3 (stage 3 at 2048, 117 MiB:
  // 6.1 -> 5.7 s) and loses a little below it (stage 3 at 1024, 29 MiB: 433 -> 453 ms;
  // stage 4 at 2048, 59 MiB: 1.46 -> 1.50 s).
  const double hidden_mib = static_cast<double>(rows) * static_cast<double>(spec().mlp_hidden) * 4.0 / (1 << 20);
  return spec().dim_out < 448 ? hidden_mib > 16 : hidden_mib > 96;
}

torch::Tensor HieraBlockImpl::forward_chunked(const torch::Tensor& x_in) {
  const auto x = x_in.contiguous();
  const int64_t B = x.size(0), N = x.size(1), C = x.size(2), rows = B * N;
  const auto x2 = x.view({rows, C});
  const auto& qw = attn->qkv->weight;
  auto qkv = torch::empty({rows, qw.size(0)}, x.options());
  const bool onednn = functional::onednn_linear_active(x);  // it has no _out form: one copy
  for (int64_t r0 = 0; r0 < rows; r0 += token_chunk) {
    const int64_t n = std::min(token_chunk, rows - r0);
    auto dst = qkv.narrow(0, r0, n);
    const auto xn = norm1->forward(x2.narrow(0, r0, n));
    timed(kLinear, xn, [&] {
      return onednn ? dst.copy_(functional::linear(attn->qkv, xn)) : at::addmm_out(dst, attn->qkv->bias, xn, qw.t());
    });
  }
  const auto o = attn->core(qkv.view({B, N, qw.size(0)})).reshape({rows, C});
  auto out = torch::empty_like(x2);
  for (int64_t r0 = 0; r0 < rows; r0 += token_chunk) {
    const int64_t n = std::min(token_chunk, rows - r0);
    const auto xc = x2.narrow(0, r0, n);
    const auto y = xc + timed(kLinear, xc, [&] { return functional::linear(attn->proj, o.narrow(0, r0, n)); });
    auto dst = out.narrow(0, r0, n);
    at::add_out(dst, y, mlp->forward(norm2->forward(y)));
  }
  return out.view({B, N, C});
}

PatchEmbedImpl::PatchEmbedImpl(const HieraConfig& c) {
  proj = register_module(
      "proj", torch::nn::Conv2d(torch::nn::Conv2dOptions(c.in_chans, c.embed_dim,
                                                         {c.patch_kernel[0], c.patch_kernel[1]})
                                    .stride({c.patch_stride[0], c.patch_stride[1]})
                                    .padding({c.patch_padding[0], c.patch_padding[1]})));
}

torch::Tensor PatchEmbedImpl::forward(const torch::Tensor& x) {
  auto y = proj->forward(x);
  return y.reshape({y.size(0), y.size(1), -1}).transpose(2, 1);
}

HieraImpl::HieraImpl(const HieraConfig& c, int64_t img_size)
    : cfg_(c), grid_(img_size / c.patch_stride[0]), stage_ends_(stage_ends(c)) {
  pos_embed = register_parameter("pos_embed", torch::zeros({1, grid_ * grid_, c.embed_dim}));
  patch_embed = register_module("patch_embed", PatchEmbed(c));
  blocks = register_module("blocks", torch::nn::ModuleList());
  size_t stage = 0;
  for (const auto& spec : block_specs(c)) {
    block_refs_.push_back(HieraBlock(spec));
    blocks->push_back(block_refs_.back());
    block_refs_.back()->attn->stage = stage;
    const auto i = static_cast<int64_t>(block_refs_.size() - 1);
    if (stage < stage_ends_.size() && i == stage_ends_[stage]) ++stage;
  }
}

void HieraImpl::set_flash_attention(bool on) {
  for (auto& b : block_refs_) b->attn->flash_4d = on;
}

void HieraImpl::set_token_chunk(int64_t rows) {
  for (auto& b : block_refs_) b->token_chunk = rows;
}

void HieraImpl::set_native_attention(const std::array<bool, 4>& by_stage) {
  for (auto& b : block_refs_)
    b->attn->native_attention = by_stage[std::min<size_t>(b->attn->stage, by_stage.size() - 1)];
}

std::vector<torch::Tensor> HieraImpl::forward(const torch::Tensor& input, const BlockHook& hook,
                                              const torch::Tensor& pos) {
  const int64_t sy = cfg_.q_stride[0], sx = cfg_.q_stride[1];
  const auto n_unroll = static_cast<int64_t>(stage_ends_.size()) - 1;
  const auto& pe = pos.defined() ? pos : pos_embed;
  const int64_t grid = input.size(2) / cfg_.patch_stride[0];
  CK_CHECK(input.size(2) == input.size(3) && pe.size(1) == grid * grid, ModelError,
           "Hiera: a ", input.size(2), "x", input.size(3), " input needs a square input and a ",
           grid, "x", grid, " position embedding, got ", pe.size(1), " tokens");
  auto x = timed(kLinear, input, [&] { return patch_embed->forward(input); }) + pe;
  x = functional::unroll(x, grid, grid, n_unroll, sy, sx);

  std::vector<torch::Tensor> features;
  int64_t levels = n_unroll, size = grid, taps = 0;
  for (size_t i = 0; i < block_refs_.size(); ++i) {
    torch::Tensor routed;
    if (hook) routed = hook(i, *block_refs_[i], x);
    x = routed.defined() ? routed : block_refs_[i]->forward(x);
    if (std::find(stage_ends_.begin(), stage_ends_.end(), static_cast<int64_t>(i)) ==
        stage_ends_.end())
      continue;
    features.push_back(
        functional::reroll(x, size, size, levels, sy, sx).permute({0, 3, 1, 2}));
    // timm's Reroll drops one unroll level (and halves the grid) after each of the first
    // q_pool stage ends.
    if (taps++ < cfg_.q_pool && levels > 0) {
      --levels;
      size /= sy;
    }
  }
  return features;
}

HieraEncoderImpl::HieraEncoderImpl(const HieraConfig& c, int64_t img_size) {
  model = register_module("model", Hiera(c, img_size));
}

}  // namespace corridorkey::model
