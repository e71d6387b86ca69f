#include <corridorkey/check.h>
#include <corridorkey/system.h>
#include <corridorkey/verify.h>

#include "config/log.h"
#include "runtime/global_switches.h"
#include "runtime/model_factory.h"
#include "model/sample_input.h"
#include "runtime/torch_boundary.h"
#include "timing.h"

#include <ATen/Context.h>
#include <torch/csrc/jit/serialization/import.h>

#include <algorithm>
#include <chrono>
#include <map>

CORRIDORKEY_NAMESPACE_BEGIN

using timing::ms_since;

namespace {

/// The archive forward's outputs by name. tools/export_torchscript.py's 13-tuple gives
/// every intermediate; a dict gives the outputs it names (CorridorKey's reference returns
/// {"alpha", "fg"}); any other tuple or list of two is (alpha, fg).
std::map<std::string, torch::Tensor> archive_outputs(const c10::IValue& r, const std::string& path) {
  const auto& names = model::GreenFormerOutput::names();
  const auto tensor = [&](const c10::IValue& v, const std::string& name) {
    CK_CHECK(v.isTensor(), ModelError, path, ": archive output '", name, "' is a ", v.tagKind(),
             ", not a tensor");
    return v.toTensor();
  };
  std::map<std::string, torch::Tensor> out;
  if (r.isGenericDict()) {
    for (const auto& kv : r.toGenericDict())
      if (kv.key().isString() &&
          std::find(names.begin(), names.end(), kv.key().toStringRef()) != names.end())
        out[kv.key().toStringRef()] = tensor(kv.value(), kv.key().toStringRef());
  } else if (r.isTuple() || r.isList()) {
    const auto items = r.isTuple() ? r.toTupleRef().elements().vec() : r.toListRef().vec();
    if (items.size() == names.size()) {
      for (size_t i = 0; i < names.size(); ++i) out[names[i]] = tensor(items[i], names[i]);
    } else {
      CK_CHECK(items.size() == 2, ModelError, path, ": archive forward returned ", items.size(),
               " outputs; expected (alpha, fg), a dict with alpha and fg, or the ", names.size(),
               " outputs of tools/export_torchscript.py");
      out["alpha"] = tensor(items[0], "alpha");
      out["fg"] = tensor(items[1], "fg");
    }
  } else {
    throw ModelError(path + ": archive forward returned a " + std::string(r.tagKind()) +
                     "; expected a dict with alpha and fg, a tuple or a list");
  }
  CK_CHECK(out.count("alpha") && out.count("fg"), ModelError, path,
           ": archive forward returned no 'alpha' and 'fg' outputs");
  return out;
}
}  // namespace

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
  if (!loaded.checkpoint.chosen_note.empty()) detail::log(LogLevel::Info, loaded.checkpoint.chosen_note);
  const auto& ck = loaded.checkpoint;
  auto net = loaded.net;
  rep.format = model::to_string(ck.format);
  rep.checkpoint = ck.path;  // the file chosen when the argument is a folder
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
    // The one place the archive's own code runs (verify's purpose: compare against it).
    std::map<std::string, torch::Tensor> ref;
    if (rep.has_reference) {
      auto m = torch::jit::load(ck.path, device);
      m.eval();
      t0 = std::chrono::steady_clock::now();
      const auto r = m.forward({x});
      rep.reference_ms = ms_since(t0);
      ref = archive_outputs(r, opt.checkpoint);
    }
    rep.passed = true;
    for (const auto& name : model::GreenFormerOutput::names()) {
      OutputDiff d;
      d.name = name;
      const auto t = out.get(name);
      d.shape.assign(t.sizes().begin(), t.sizes().end());
      if (auto it = ref.find(name); it != ref.end()) {
        const auto& want = it->second;
        CK_CHECK(want.sizes() == t.sizes(), ModelError, opt.checkpoint, ": output '", d.name,
                 "' has shape ", want.sizes(), " in the archive but ", t.sizes(), " natively");
        d.compared = true;
        d.max_abs_diff = (t - want.to(t.dtype())).abs().max().item<double>();
        d.max_abs_ref = want.abs().max().item<double>();
        if ((d.name == "alpha" || d.name == "fg") && !(d.max_abs_diff <= opt.tolerance))
          rep.passed = false;
      }
      rep.diffs.push_back(d);
    }
    return rep;
  });
}

CORRIDORKEY_NAMESPACE_END
