#include <corridorkey/check.h>
#include <corridorkey/system.h>

#include <corridorkey/base/hash.h>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/mps.h>
#include <torch/version.h>

#include <algorithm>
#include <fstream>
#include <locale>
#include <sstream>
#ifdef CK_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>
#endif

CORRIDORKEY_NAMESPACE_BEGIN

CpuFeatures cpu_features() {
  // The kernel's view of the CPU (/proc/cpuinfo, first processor): what the OS enabled,
  // which is what ATen's own dispatch checks too. Elsewhere (macOS) no x86 features.
  static const CpuFeatures f = [] {
    CpuFeatures c;
    std::ifstream in("/proc/cpuinfo");
    auto value = [](const std::string& l) {
      const auto colon = l.find(':');
      auto v = colon == std::string::npos ? std::string() : l.substr(colon + 1);
      v.erase(0, std::min(v.find_first_not_of(" \t"), v.size()));
      return v;
    };
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) break;  // the first processor is enough
      if (line.rfind("model name", 0) == 0) {
        c.model_name = value(line);
      } else if (line.rfind("cpu family", 0) == 0) {
        c.family = value(line);
      } else if (line.rfind("model", 0) == 0) {
        c.model = value(line);
      } else if (line.rfind("stepping", 0) == 0) {
        c.stepping = value(line);
      } else if (line.rfind("flags", 0) == 0) {
        const auto flags = value(line);
        // Low 32 bits kept: eight hex digits in the identity (the cache keys' form).
        c.flags_hash = static_cast<uint32_t>(base::fnv1a64(flags) & 0xffffffffu);
        std::istringstream words(flags);
        words.imbue(std::locale::classic());  // numbers in every locale
        for (std::string w; words >> w;) {
          c.avx2 |= w == "avx2";
          c.avx512 |= w == "avx512f";
          c.avx512_bf16 |= w == "avx512_bf16";
          c.amx |= w == "amx_bf16";
        }
      }
    }
    c.onednn = at::hasMKLDNN();
    return c;
  }();
  return f;
}

std::string CpuFeatures::identity() const {
  std::ostringstream s;
  s.imbue(std::locale::classic());  // no digit grouping in the hash, in any locale
  s << (model_name.empty() ? "unknown cpu" : model_name) << " (family " << family << " model "
    << model << " stepping " << stepping << ", flags " << std::hex << flags_hash << ")";
  return s.str();
}

Precision resolve_precision(Precision p, const std::string& device) {
  if (p != Precision::Auto) return p;
  if (device.rfind("cuda", 0) == 0 || device == "mps") return Precision::Float16;
  const auto f = cpu_features();
  // bf16 pays on CPUs with native bf16 dot products; elsewhere it is emulated and slower
  // than float32. float16 never by default on a CPU (no native fp16 kernels on most).
  return f.amx || f.avx512_bf16 ? Precision::BFloat16 : Precision::Float32;
}

DeviceAvailability probe_devices() {
  DeviceAvailability a;
  try {
    a.cuda_devices = torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  } catch (const std::exception&) {
    a.cuda_devices = 0;  // broken driver: treat as absent, "cuda" requests then fail clearly
  }
  try {
    a.mps = torch::mps::is_available();
  } catch (const std::exception&) {
    a.mps = false;
  }
  return a;
}

SystemInfo system_info() {
  SystemInfo s;
  s.engine_version = CORRIDORKEY_VERSION_STRING;
  s.torch_version = TORCH_VERSION;
#ifdef CK_WITH_CUDA
  s.cuda_build = true;
#endif
  s.cuda_runtime = CK_TORCH_CUDA_VERSION;  // the wheel's CUDA, "" for CPU wheels
  const auto avail = probe_devices();
  s.mps = avail.mps;
  s.cpu_threads = at::get_num_threads();
  s.cpu = cpu_features();
  s.auto_precision_cpu = to_string(resolve_precision(Precision::Auto, "cpu"));
  s.auto_precision_cuda = to_string(resolve_precision(Precision::Auto, "cuda"));
#ifdef CK_WITH_CUDA
  for (int i = 0; i < avail.cuda_devices; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    s.cuda.push_back({i, p.name, static_cast<uint64_t>(p.totalGlobalMem), p.major, p.minor});
  }
#else
  for (int i = 0; i < avail.cuda_devices; ++i) s.cuda.push_back({i, "cuda", 0, 0, 0});
#endif
  return s;
}

std::string choose_device(const std::string& request, const DeviceAvailability& a) {
  if (request.empty() || request == "auto") {
    if (a.cuda_devices > 0) return "cuda:0";
    if (a.mps) return "mps";
    return "cpu";
  }
  if (request == "cpu") return "cpu";
  if (request == "mps") {
    CK_CHECK(a.mps, DeviceError, "device 'mps' requested but Apple MPS is not available "
             "(needs an Apple-silicon Mac and a LibTorch built with MPS)");
    return "mps";
  }
  if (request.rfind("cuda", 0) == 0) {
    int index = 0;
    if (request.size() > 4) {
      CK_CHECK(request[4] == ':' && request.size() > 5 &&
                   request.find_first_not_of("0123456789", 5) == std::string::npos,
               DeviceError, "device '", request, "' is malformed: expected cuda or cuda:N");
      index = std::stoi(request.substr(5));
    }
    CK_CHECK(a.cuda_devices > 0, DeviceError, "device '", request,
             "' requested but no CUDA device is available");
    CK_CHECK(index < a.cuda_devices, DeviceError, "device '", request, "' requested but only ",
             a.cuda_devices, " CUDA device(s) exist (cuda:0..cuda:", a.cuda_devices - 1, ")");
    return "cuda:" + std::to_string(index);
  }
  throw DeviceError("unknown device '" + request + "': expected auto, cpu, cuda, cuda:N or mps");
}

CORRIDORKEY_NAMESPACE_END
