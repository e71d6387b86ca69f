// The plan's words (corridorkey/tune.h): the enums' names as plans, caches and reports
// write them, a plan's one-line summary, and where the per-user cache lives.
#include <corridorkey/tune.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <locale>
#include <sstream>

CORRIDORKEY_NAMESPACE_BEGIN

const char* to_string(TuneOption o) {
  switch (o) {
    case TuneOption::ModelPrecision: return "model_precision";
    case TuneOption::NativeAttention: return "native_attention";
    case TuneOption::NativeAttentionStage1: return "native_attention.stage1";
    case TuneOption::NativeAttentionStage2: return "native_attention.stage2";
    case TuneOption::NativeAttentionStage3: return "native_attention.stage3";
    case TuneOption::NativeAttentionStage4: return "native_attention.stage4";
    case TuneOption::OnednnLinear: return "onednn_linear";
    case TuneOption::WinogradConv: return "winograd_conv";
    case TuneOption::TiledRefiner: return "tiled_refiner";
  }
  return "?";
}

const char* to_string(TuneChoice c) {
  switch (c) {
    case TuneChoice::False: return "false";
    case TuneChoice::True: return "true";
    case TuneChoice::Float32: return "float32";
    case TuneChoice::BFloat16: return "bfloat16";
    case TuneChoice::Float16: return "float16";
  }
  return "?";
}

const char* to_string(DecisionSource s) {
  switch (s) {
    case DecisionSource::Plan: return "plan";
    case DecisionSource::Flag: return "flag";
    case DecisionSource::Rule: return "rule";
    case DecisionSource::Only: return "only";
  }
  return "?";
}

const char* to_string(PlanOrigin o) {
  switch (o) {
    case PlanOrigin::Off: return "off";
    case PlanOrigin::Trials: return "trials";
    case PlanOrigin::Cache: return "cache";
    case PlanOrigin::Memory: return "memory";
  }
  return "?";
}

TuneOption native_attention_stage(int stage) {
  switch (stage) {
    case 1: return TuneOption::NativeAttentionStage1;
    case 2: return TuneOption::NativeAttentionStage2;
    case 3: return TuneOption::NativeAttentionStage3;
    default: return TuneOption::NativeAttentionStage4;
  }
}

const TuneDecision* TunePlan::find(TuneOption option) const {
  for (const auto& d : decisions)
    if (d.option == option) return &d;
  return nullptr;
}

std::string TunePlan::summary() const {
  std::ostringstream s;
  s.imbue(std::locale::classic());  // numbers in every locale
  for (const auto& d : decisions) {
    s << to_string(d.option) << " " << to_string(d.value) << " (" << to_string(d.source);
    if (!d.why.empty()) s << ": " << printable_text(d.why);  // a file's words: one line, no escapes
    for (size_t i = 0; i < d.times_ms.size(); ++i) {
      s << (i == 0 && d.why.empty() ? ": " : ", ") << printable_text(d.times_ms[i].first) << " ";
      if (std::isfinite(d.times_ms[i].second))
        s << static_cast<long long>(d.times_ms[i].second + 0.5) << " ms";
      else
        s << "(failed)";
    }
    s << ")\n";
  }
  return s.str();
}

std::string tune_cache_path() {
  namespace fs = std::filesystem;
  if (const char* p = std::getenv("CORRIDORKEY_TUNE_CACHE"); p && *p) return p;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return (fs::path(x) / "corridorkey-engine" / "tune.json").string();
  if (const char* h = std::getenv("HOME"); h && *h)
    return (fs::path(h) / ".cache" / "corridorkey-engine" / "tune.json").string();
  // No fixed name in a shared /tmp: another local user could plant a link there first.
  return {};
}

CORRIDORKEY_NAMESPACE_END
