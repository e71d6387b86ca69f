// Text names of the option enums (what profiles, flags and reports print).
#include <corridorkey/options.h>

CORRIDORKEY_NAMESPACE_BEGIN

const char* to_string(Precision p) {
  switch (p) {
    case Precision::Float32: return "float32";
    case Precision::Float16: return "float16";
    case Precision::BFloat16: return "bfloat16";
    case Precision::Auto: return "auto";
  }
  return "?";
}

const char* to_string(RefinerTiling t) {
  switch (t) {
    case RefinerTiling::Off: return "false";
    case RefinerTiling::On: return "true";
    case RefinerTiling::Auto: return "auto";
  }
  return "?";
}

const char* to_string(AutoSwitch s) {
  switch (s) {
    case AutoSwitch::Off: return "false";
    case AutoSwitch::On: return "true";
    case AutoSwitch::Auto: return "auto";
  }
  return "?";
}

const char* to_string(TuneMode t) {
  switch (t) {
    case TuneMode::Off: return "off";
    case TuneMode::Auto: return "auto";
    case TuneMode::Refresh: return "refresh";
    case TuneMode::CacheOnly: return "cache-only";
  }
  return "?";
}

const char* to_string(CompileMode m) {
  switch (m) {
    case CompileMode::None: return "none";
    case CompileMode::Default: return "default";
    case CompileMode::ReduceOverhead: return "reduce-overhead";
    case CompileMode::MaxAutotune: return "max-autotune";
  }
  return "?";
}

const char* to_string(EngineKind k) {
  return k == EngineKind::Original ? "original" : "optimized";
}

const char* to_string(OnOom o) { return o == OnOom::Fail ? "fail" : "degrade"; }

const char* to_string(HintSource h) {
  switch (h) {
    case HintSource::Auto: return "auto";
    case HintSource::Files: return "files";
    case HintSource::Chroma: return "chroma";
  }
  return "?";
}

const char* to_string(Screen s) {
  switch (s) {
    case Screen::Auto: return "auto";
    case Screen::Green: return "green";
    case Screen::Blue: return "blue";
  }
  return "?";
}

const char* to_string(VideoCodec c) { return c == VideoCodec::H264 ? "h264" : "prores"; }

CORRIDORKEY_NAMESPACE_END
