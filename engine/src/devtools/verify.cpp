#include <corridorkey/errors.h>
#include <corridorkey/system.h>
#include <corridorkey/verify.h>

#include "runtime/global_switches.h"
#include "runtime/model_factory.h"
#include "model/sample_input.h"
#include "runtime/torch_boundary.h"
#include "timing.h"

#include <ATen/Context.h>
#include <torch/csrc/jit/serialization/import.h>

#include <chrono>

CORRIDORKEY_NAMESPACE_BEGIN

using timing::ms_since;

VerifyReport verify_checkpoint(const VerifyOptions& opt) {
  VerifyReport rep;
  rep.checkpoint = opt.checkpoint;
  rep.device = choose_device(opt.device, probe_devices());
  const torch::Device device(rep.device);
  // fp32 parity needs exact fp32 matmuls on both sides (TF32 changes results ~1e-3); the
  // host's own setting is back when verify returns.
  detail::GlobalSwitchGuard switches;
  switches.disable_tf32();
  torch::NoGradGuard no_grad;

  auto loaded = detail::make_model({opt.checkpoint, opt.img_size, "", 0});
  const auto& ck = loaded.checkpoint;
  auto net = loaded.net;
  rep.format = ck.format == model::CheckpointFormat::TorchScript ? "torchscript" : "torch.save";
  const auto& cfg = net->config();
  rep.arch = cfg.arch;
  rep.img_size = cfg.img_size;

  return detail::rethrow_torch(opt.checkpoint, [&] {
    net->set_flash_attention(opt.flash_attention);
    net->to(device);
    for (const auto& p : net->parameters()) rep.parameters += p.numel();

    const auto x = model::seeded_input(1, cfg.img_size, opt.seed).to(device);
    auto t0 = std::chrono::steady_clock::now();
    const auto out = net->forward(x);
    rep.native_ms = ms_since(t0);
    rep.alpha_mean = out.alpha.mean().item<double>();
    rep.fg_mean = out.fg.mean().item<double>();

    // The archive's own forward is traced at its export size; only comparable there.
    rep.has_reference = ck.format == model::CheckpointFormat::TorchScript &&
                        cfg.img_size == ck.config.img_size;
    std::vector<torch::Tensor> ref;
    if (rep.has_reference) {
      auto m = torch::jit::load(opt.checkpoint, device);
      m.eval();
      t0 = std::chrono::steady_clock::now();
      auto r = m.forward({x});
      rep.reference_ms = ms_since(t0);
      CK_CHECK(r.isTuple(), ModelError, opt.checkpoint,
               ": archive forward must return the 13-tensor tuple of tools/export_torchscript.py");
      for (const auto& v : r.toTupleRef().elements()) ref.push_back(v.toTensor());
      CK_CHECK(ref.size() == model::GreenFormerOutput::names().size(), ModelError,
               opt.checkpoint, ": archive forward returned ", ref.size(), " outputs, expected ",
               model::GreenFormerOutput::names().size());
    }
    rep.passed = true;
    const auto& names = model::GreenFormerOutput::names();
    for (size_t i = 0; i < names.size(); ++i) {
      OutputDiff d;
      d.name = names[i];
      const auto t = out.get(names[i]);
      d.shape.assign(t.sizes().begin(), t.sizes().end());
      if (rep.has_reference) {
        CK_CHECK(ref[i].sizes() == t.sizes(), ModelError, opt.checkpoint, ": output '", d.name,
                 "' has shape ", ref[i].sizes(), " in the archive but ", t.sizes(), " natively");
        d.max_abs_diff = (t - ref[i]).abs().max().item<double>();
        d.max_abs_ref = ref[i].abs().max().item<double>();
        if ((d.name == "alpha" || d.name == "fg") && !(d.max_abs_diff <= opt.tolerance))
          rep.passed = false;
      }
      rep.diffs.push_back(d);
    }
    return rep;
  });
}

CORRIDORKEY_NAMESPACE_END
