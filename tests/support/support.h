// Shared helpers of the C++ tests: fixture files and tensor comparisons.
#pragma once

#include "model/torch_archive.h"

#include <torch/types.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <unistd.h>

namespace ck_test {

/// Folder written by tests/make_fixtures.py (ctest sets CK_FIXTURES).
inline std::string fixture(const std::string& name) {
  const char* dir = std::getenv("CK_FIXTURES");
  if (!dir) throw std::runtime_error("CK_FIXTURES is not set: run the tests through ctest");
  const auto p = std::filesystem::path(dir) / name;
  if (!std::filesystem::exists(p))
    throw std::runtime_error("missing fixture " + p.string() + " (tests/make_fixtures.py)");
  return p.string();
}

/// Reads a torch.save'd dict of tensors (any torch.save output: OrderedDict, views, ...)
/// with the engine's own reader.
inline std::map<std::string, torch::Tensor> load_tensors(const std::string& path) {
  const auto entries = corridorkey::model::load_tensor_dict(path);
  return {entries.begin(), entries.end()};
}

inline double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat).cpu() - b.to(torch::kFloat).cpu()).abs().max().item<double>();
}

inline double max_abs(const torch::Tensor& a) {
  return a.to(torch::kFloat).abs().max().item<double>();
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

/// The folders temp_dir() made, removed when the test process exits (CK_KEEP_TEST_FILES=1
/// keeps them to look at): a suite run used to leave one per StderrCapture and pipeline test.
struct TempDirs {
  std::vector<std::filesystem::path> paths;
  ~TempDirs() {
    if (const char* keep = std::getenv("CK_KEEP_TEST_FILES"); keep && *keep && std::string(keep) != "0") return;
    for (const auto& p : paths) {
      std::error_code ec;
      std::filesystem::remove_all(p, ec);
    }
  }
};
inline TempDirs& temp_dirs() {
  static TempDirs dirs;
  return dirs;
}

/// A fresh empty folder under the system temp dir.
inline std::filesystem::path temp_dir(const std::string& tag) {
  // The pid keeps two suites on one machine (a TSan run beside the plain one, two worktrees)
  // out of each other's folders: std::rand() is unseeded, so each process draws the same names.
  auto p = std::filesystem::temp_directory_path() /
           ("ck_test_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(std::rand()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  temp_dirs().paths.push_back(p);
  return p;
}

}  // namespace ck_test
