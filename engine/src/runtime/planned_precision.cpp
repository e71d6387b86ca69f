// planned_precision (tune.h): the precision a job pins for all of its chunks.
#include <corridorkey/engine.h>
#include <corridorkey/errors.h>
#include <corridorkey/system.h>
#include <corridorkey/tune.h>

#include "runtime/global_switches.h"
#include "model/checkpoint.h"
#include "runtime/model_factory.h"
#include "runtime/model_impl.h"
#include "runtime/torch_boundary.h"
#include "runtime/tune_plan.h"

CORRIDORKEY_NAMESPACE_BEGIN

std::pair<Precision, std::string> planned_precision(const ModelOptions& options, const EngineSettings& engine) {
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
    std::string notes;
    detail::apply_global_switches(options, false, notes);  // the thread count is part of the key
    // The architecture as Model::load reads it, and the plan it would make first.
    detail::ModelSource src;
    src.checkpoint = detail::checkpoint_to_read(options);
    src.img_size = engine.img_size;
    src.random_arch = src.checkpoint.empty() ? options.random_weights_arch : "";
    src.mmap = options.mmap;
    src.backbone_size = engine.backbone_size;
    src.backbone_percent = engine.backbone_percent;
    const auto read = detail::read_source(src);
    const auto planned = detail::make_plan(options, engine, read.config, device, notes);
    return {planned.model.model_precision, std::string("the measured plan of the machine that planned the job (") +
                                               to_string(planned.plan.origin) + ")"};
  });
}

CORRIDORKEY_NAMESPACE_END
