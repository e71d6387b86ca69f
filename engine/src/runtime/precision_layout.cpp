// Precision and layouts: the storage type of the weights, channels-last, the attention
// switches and decoder folds a prepared network is built with (prepare_net), and an
// engine's own half-precision copy when on_oom degrades.
#include "runtime/model_runner.h"

#include <corridorkey/system.h>

#include "config/log.h"
#include "runtime/runner_internals.h"

namespace corridorkey::detail {

torch::ScalarType to_dtype(Precision p) {
  switch (p) {
    case Precision::Float16: return torch::kHalf;
    case Precision::BFloat16: return torch::kBFloat16;
    default: return torch::kFloat;
  }
}

torch::ScalarType weight_dtype_for(const ModelOptions& o, const torch::Device& device) {
  if (o.mixed_precision) return torch::kFloat;
  return to_dtype(resolve_precision(o.model_precision, device.str()));
}

namespace {
/// The switches a prepared network carries besides its weights' type and layout.
void apply_switches(model::GreenFormerImpl& net, const ModelOptions& o,
                    const std::array<bool, 4>& native) {
  net.set_flash_attention(o.flash_attention);
  net.encoder->model->set_native_attention(native);
  net.encoder->model->set_token_chunk(o.token_chunk);
  net.set_fused_decoders(o.fused_decoder);
}

/// Folds the decoders now when they run fused, so forward() only reads shared weights.
void fold_decoders(model::GreenFormerImpl& net, const ModelOptions& o) {
  if (!o.fused_decoder) return;
  net.alpha_decoder->fold();
  net.fg_decoder->fold();
}

uint64_t stored_bytes(model::GreenFormerImpl& net) {
  uint64_t n = 0;
  for (const auto& p : net.parameters()) n += p.numel() * p.element_size();
  for (const auto& b : net.buffers()) n += b.numel() * b.element_size();
  return n;
}

}  // namespace

/// on_oom's precision step for one engine: a copy of the prepared network in `dtype`, with
/// the same layout and switches (the shared one stays as it is for the other engines).
model::GreenFormer half_copy(const PreparedNet& p, torch::ScalarType dtype) {
  torch::NoGradGuard ng;
  model::GreenFormer copy(p.net->config());
  auto src = p.net->named_parameters();
  for (auto& kv : copy->named_parameters()) kv.value().set_data(src[kv.key()].to(p.device, dtype));
  auto srcb = p.net->named_buffers();
  for (auto& kv : copy->named_buffers()) {
    const auto& b = srcb[kv.key()];
    kv.value().set_data(b.is_floating_point() ? b.to(p.device, dtype) : b.clone());
  }
  copy->eval();
  apply_switches(*copy, p.options, p.native);
  fold_decoders(*copy, p.options);
  return copy;
}

/// A runner's own token router on the prepared router's weights (aliased: set_data shares
/// the storage), since routing writes per-frame index sets into the module.
model::TokenRouter own_router(const PreparedNet& p, int64_t encoder_size) {
  if (!p.router) return nullptr;
  const auto& o = p.options;
  model::RoutingOptions ro;
  ro.low = o.edge_threshold_low;
  ro.high = o.edge_threshold_high;
  ro.min_edge_tokens = o.min_edge_tokens;
  model::TokenRouter r(p.net->config().encoder, encoder_size, ro);
  torch::NoGradGuard ng;
  auto src = p.router->named_parameters();
  for (auto& kv : r->named_parameters()) kv.value().set_data(src[kv.key()]);
  auto srcb = p.router->named_buffers();
  for (auto& kv : r->named_buffers()) kv.value().set_data(srcb[kv.key()]);
  r->eval();
  return r;
}

std::array<bool, 4> planned_native(const ModelOptions& o, const TunePlan* plan) {
  auto stage_native = [&](TuneOption option) {
    if (o.native_attention == AutoSwitch::On) return true;
    if (o.native_attention == AutoSwitch::Off || !plan) return false;
    const auto* d = plan->find(option);
    return d && d->on();
  };
  std::array<bool, 4> native{};
  for (size_t i = 0; i < native.size(); ++i)
    native[i] = o.flash_attention && stage_native(native_attention_stage(static_cast<int>(i) + 1));
  return native;
}

std::shared_ptr<const PreparedNet> prepare_net(model::GreenFormer net, const ModelOptions& o,
                                               torch::Device device, std::string& notes,
                                               model::TokenRouter router, const TunePlan* plan) {
  auto p = std::make_shared<PreparedNet>();
  p->options = o;
  p->device = device;
  // Precision: mixed keeps fp32 weights and autocasts matmuls/convs to the half type the
  // profile names (fp16 by default on CUDA, bf16 on CPU); otherwise weights and
  // activations are cast to model_precision.
  const Precision prec = resolve_precision(o.model_precision, device.str());
  if (o.model_precision == Precision::Auto)
    note(notes, std::string("model_precision auto -> ") + to_string(prec) + " on " + device.str());
  if (o.mixed_precision) {
    p->autocast = true;
    p->autocast_dtype = prec != Precision::Float32 ? to_dtype(prec)
                        : device.is_cuda()         ? torch::kHalf
                                                   : torch::kBFloat16;
    p->weight_dtype = torch::kFloat;
  } else {
    p->weight_dtype = to_dtype(prec);
  }
  if (p->weight_dtype == torch::kHalf && device.is_cpu())
    note(notes, "model_precision float16 on CPU runs, but slowly (no native fp16 kernels on "
                "most CPUs); bfloat16 or float32 are faster there");
  net->to(device, p->weight_dtype);
  net->eval();
  if (router) {
    router->to(device, p->weight_dtype);
    router->eval();
  }
  p->native = planned_native(o, plan);
  apply_switches(*net, o, p->native);
  if (o.channels_last) net->to_channels_last();
  fold_decoders(*net, o);
  p->weight_bytes = stored_bytes(*net);
  p->net = std::move(net);
  p->router = std::move(router);
  return p;
}

}  // namespace corridorkey::detail
