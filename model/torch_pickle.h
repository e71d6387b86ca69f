// A restricted unpickler for the pickles inside PyTorch files: torch.save's data.pkl (zip),
// the object pickle of the legacy (non-zip) format, and a TorchScript archive's data.pkl.
//
// It builds inert values only (None, bool, int, float, str, bytes, list, tuple, set, dict,
// tensor, storage, "global" references and objects holding their BUILD state). Nothing in
// the file is ever called: REDUCE / NEWOBJ / BUILD are interpreted for an allow-list of
// globals (what torch.load(weights_only=True) accepts and a checkpoint needs), and any
// other global (os.system, builtins.eval, ...) is refused when the GLOBAL opcode names it,
// before anything else happens. Every length and count read from the file is checked
// against the bytes that are actually there, so a malformed file is a ModelError naming the
// file, never a crash or an allocation larger than the file.
#pragma once

#include <c10/core/Storage.h>
#include <torch/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace corridorkey::model::pickle {

enum class Kind : uint8_t {
  None, Bool, Int, BigInt, Float, Str, Bytes, List, Tuple, Set, Dict,
  Tensor, Storage, Global, Object
};

/// One unpickled value. Containers hold non-owning pointers into the Pickle's arena, so
/// shared references (memo) and cycles cost nothing and destruction is flat.
struct Value {
  Kind kind = Kind::None;
  bool b = false;                   // Bool
  int64_t i = 0;                    // Int
  double f = 0;                     // Float
  std::string s;                    // Str / Bytes; BigInt: little-endian two's complement;
                                    // Global: "module.name"; Object: its class ("module.name")
  std::vector<Value*> items;        // List, Tuple, Set
  std::vector<std::pair<Value*, Value*>> entries;  // Dict, in insertion order
  std::unordered_map<std::string, size_t> index;   // Dict: hashable key -> entries position
  Value* state = nullptr;           // Object: what BUILD gave it (module attributes: a dict)
  torch::Tensor tensor;             // Tensor
  c10::Storage storage;             // Storage: the shared bytes ...
  c10::ScalarType dtype = c10::ScalarType::Undefined;  // Storage / Global (dtype or storage type)
  int64_t offset = 0, numel = 0;    // Storage: the elements of `dtype` this reference spans
  int global = 0;                   // Global: which allowed global (torch_pickle.cpp)

  /// Dict entry with a str key, or nullptr.
  const Value* get(std::string_view key) const;
  /// "int", "str", "dict", "tensor", "object __torch__.Foo", ... for messages.
  std::string type_name() const;
};

/// The result of one pickle: the root value and the arena that owns every value.
class Pickle {
 public:
  Pickle() = default;
  Pickle(std::unique_ptr<std::deque<Value>> arena, const Value* root)
      : arena_(std::move(arena)), root_(root) {}
  const Value& root() const { return *root_; }

 private:
  std::unique_ptr<std::deque<Value>> arena_;
  const Value* root_ = nullptr;
};

struct UnpickleOptions {
  /// Prefix of every error message: the file (and record) being read.
  std::string what;
  /// TorchScript data.pkl: `__torch__.*` classes become inert objects (NEWOBJ + BUILD keep
  /// the state; no __setstate__ runs). Refused in torch.save files.
  bool torchscript = false;
  /// Bytes of storage `key` for a persistent id ('storage', type, key, location, numel):
  /// at least numel * elementSize(dtype) = `nbytes` long (the callback checks and throws
  /// ModelError otherwise). Called once per key; later references share the at::Storage.
  std::function<c10::Storage(const std::string& key, c10::ScalarType dtype, uint64_t nbytes)>
      load_storage;
};

/// Unpickles data[0, size). `consumed`, when given, receives the offset just past STOP
/// (the legacy format holds several pickles back to back).
Pickle unpickle(const char* data, size_t size, const UnpickleOptions& options,
                size_t* consumed = nullptr);

}  // namespace corridorkey::model::pickle
