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
  // Every chunk reads the same job file: an explicit precision is already one precision.
  if (options.model_precision != Precision::Auto)
    return {options.model_precision, "set in the job or its profile"};
  // Only a CPU job is planned here: with device auto the nodes may have GPUs (float16) that
  // the submission host lacks; tune off keeps the flag rules unpinned, as before.
  if (options.tune == TuneMode::Off)
    return {Precision::Auto, "tune off: each node's flag rule"};
  if (options.device != "cpu")
    return {Precision::Auto, "device " + options.device + ": set device: cpu or model_precision to pin it"};
  if (options.mixed_precision)
    return {Precision::Auto, "mixed_precision autocasts"};
  return detail::rethrow_torch("planning the precision", [&]() -> std::pair<Precision, std::string> {
    const torch::Device device("cpu");
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
    cfg.resolve_backbone(o.backbone_size, o.backbone_percent);
    const auto plan = detail::resolve_plan(o, cfg, device, notes);
    return {o.model_precision, "the measured plan of the machine that planned the job (" + plan.origin + ")"};
  });
}

CORRIDORKEY_NAMESPACE_END
