// JSON-RPC 2.0 for `serve`: the error codes, the reply objects and typed access to params.
// Codes below -32000 are the server's own; each maps to one of the CLI's exit classes, so a
// host handles a failed request as it would handle the CLI's exit code (docs/embedding.md).
#pragma once

#include <nlohmann/json.hpp>

#include <exception>
#include <stdexcept>
#include <string>

namespace corridorkey::serve {

enum Code : int {
  kParseError = -32700,      // not JSON
  kInvalidRequest = -32600,  // not a JSON-RPC 2.0 request object, or a line over the limit
  kMethodNotFound = -32601,
  kInvalidParams = -32602,   // a parameter missing, of the wrong type, or unknown
  kInternal = -32603,
  kUsage = -32002,           // ConfigError: exit 2
  kInput = -32003,           // IoError: exit 3
  kModel = -32004,           // ModelError: exit 4
  kDevice = -32005,          // DeviceError: exit 4
  kBusy = -32010,            // the model's queue is full: retry later
  kCancelled = -32011,       // job.cancel, a disconnect, or the server stopping
  kUnauthorized = -32012,    // TCP: no server.auth with the token yet
  kUnknownFrame = -32013,    // frame.repost: frame_id never keyed or evicted from the cache
  kFailure = -32001,         // anything else: exit 1
};

/// `s` with control characters other than newline and tab written as JSON-style escapes
/// (a NUL in an echoed method name cut the message short, what() being a C string).
std::string escape_controls(const std::string& s);

/// A failed request with its code; `data` goes into the error object as is.
class RpcError : public std::runtime_error {
 public:
  RpcError(int code, const std::string& message, nlohmann::json data = nullptr)
      : std::runtime_error(escape_controls(message)), code_(code), data_(std::move(data)) {}
  int code() const { return code_; }
  const nlohmann::json& data() const { return data_; }

 private:
  int code_;
  nlohmann::json data_;
};

/// {"code", "message", "data": {"kind": usage|input|model|device|failure|..., "exit_code"}}.
nlohmann::json error_object(const std::exception& e);
nlohmann::json error_reply(const nlohmann::json& id, const std::exception& e);
nlohmann::json error_reply(const nlohmann::json& id, int code, const std::string& message);
nlohmann::json result_reply(const nlohmann::json& id, nlohmann::json result);
nlohmann::json notification(const std::string& method, nlohmann::json params);

/// Deepest [ / { nesting a request may have (the protocol needs 4).
constexpr int kMaxDepth = 64;

/// A request line, checked: an object with "jsonrpc": "2.0", a string "method", "params"
/// an object (or absent), "id" a string, number or null (absent: a notification, no reply).
struct Request {
  nlohmann::json id;  // null when absent
  bool has_id = false;
  std::string method;
  nlohmann::json params = nlohmann::json::object();
};
/// Throws RpcError kParseError / kInvalidRequest (with the id when one could be read).
Request parse_request(const std::string& line, nlohmann::json* id_seen);

/// Typed parameters; RpcError kInvalidParams names the method and the key.
std::string param_string(const nlohmann::json& params, const char* key, const std::string& method,
                         const std::string& fallback = {});
bool has_param(const nlohmann::json& params, const char* key);
/// A JSON scalar as the text the option tables parse ("0.5", "true", "cpu"), of the JSON type
/// the field's kind asks for (OptionKind): RpcError kInvalidParams naming the key otherwise.
std::string scalar_text(const nlohmann::json& v, const std::string& key, const std::string& method);
/// `s` fit to quote in a message: control characters escaped, at most `max` bytes kept.
std::string printable(const std::string& s, std::size_t max = 200);

}  // namespace corridorkey::serve
