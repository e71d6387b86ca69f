#include "runtime/model_factory.h"

#include <corridorkey/errors.h>

#include "runtime/random_weights.h"

#include <atomic>

namespace corridorkey::detail {
namespace {
std::atomic<uint64_t> g_checkpoint_loads{0};
}  // namespace

LoadedModel make_model(const ModelSource& src) {
  LoadedModel m;
  if (src.checkpoint.empty()) {
    CK_CHECK(!src.random_arch.empty(), ConfigError,
             "no checkpoint and no random-weights architecture given");
    auto cfg = model::GreenFormerConfig::by_name(src.random_arch, src.img_size ? src.img_size : 512);
    cfg.validate();
    m.net = model::GreenFormer(cfg);
    randomize_weights(*m.net, src.seed);  // drawn in float32: the same values for every dtype
    if (src.dtype != torch::kFloat) m.net->to(src.dtype);
    m.description = "random:" + src.random_arch;
  } else {
    m.checkpoint = model::read_checkpoint(src.checkpoint);
    ++g_checkpoint_loads;
    m.net = model::GreenFormer(model::config_at(m.checkpoint, src.img_size));
    if (src.dtype != torch::kFloat) m.net->to(src.dtype);
    model::load_weights(*m.net, m.checkpoint);  // copy_ converts to the parameters' dtype
    m.description = src.checkpoint;
  }
  m.net->eval();
  return m;
}

uint64_t checkpoint_loads() { return g_checkpoint_loads.load(); }

}  // namespace corridorkey::detail
