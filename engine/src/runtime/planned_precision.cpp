// planned_precision (tune.h): the precision a job pins for all of its chunks.
#include <corridorkey/engine.h>
#include <corridorkey/errors.h>
#include <corridorkey/system.h>
#include <corridorkey/tune.h>

#include "runtime/global_switches.h"
#include "model/checkpoint.h"
#include "runtime/torch_boundary.h"
#include "runtime/tune_plan.h"

CORRIDORKEY_NAMESPACE_BEGIN

std::pair<Precision, std::string> planned_precision(const EngineOptions& options) {
  if (options.model_precision != Precision::Auto)
    return {options.model_precision, "set in the job or its profile"};
  return detail::rethrow_torch("planning the precision", [&]() -> std::pair<Precision, std::string> {
    const std::string dev = choose_device(options.device, probe_devices());
    const torch::Device device(dev);
    if (options.tune == TuneMode::Off || !device.is_cpu() || options.mixed_precision)
      return {resolve_precision(Precision::Auto, dev), "the flag rule of the machine that planned the job"};
    EngineOptions o = options;
    std::string notes;
    detail::apply_global_switches(o, false, notes);  // the thread count is part of the key
    model::GreenFormerConfig cfg;
    if (o.checkpoint.empty() && !o.random_weights_arch.empty()) {
      cfg = model::GreenFormerConfig::by_name(o.random_weights_arch, o.img_size ? o.img_size : 512);
    } else {
      model::ReadOptions ro;
      ro.mmap = o.mmap;
      const auto ck = model::read_checkpoint(o.checkpoint.empty() ? default_checkpoint() : o.checkpoint, ro);
      cfg = model::config_at(ck, o.img_size);
    }
    const auto plan = detail::resolve_plan(o, cfg, device, notes);
    return {o.model_precision, "the measured plan of the machine that planned the job (" + plan.origin + ")"};
  });
}

CORRIDORKEY_NAMESPACE_END
