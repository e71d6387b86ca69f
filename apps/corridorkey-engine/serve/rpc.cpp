#include "serve/rpc.h"

#include "event_stream.h"

#include <corridorkey/errors.h>

#include <algorithm>

namespace corridorkey::serve {

using nlohmann::json;

json error_object(const std::exception& e) {
  if (auto* r = dynamic_cast<const RpcError*>(&e)) {
    json o{{"code", r->code()}, {"message", r->what()}};
    if (!r->data().is_null()) o["data"] = r->data();
    return o;
  }
  const auto c = cli::exit_class(e);
  const std::string kind = c.kind;
  const int code = kind == "usage" ? kUsage : kind == "input" ? kInput : kind == "model" ? kModel
                   : kind == "device" ? kDevice : kFailure;
  return {{"code", code}, {"message", e.what()}, {"data", {{"kind", kind}, {"exit_code", c.exit_code}}}};
}

json error_reply(const json& id, const std::exception& e) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", error_object(e)}};
}

json error_reply(const json& id, int code, const std::string& message) {
  return error_reply(id, RpcError(code, message));
}

json result_reply(const json& id, json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

json notification(const std::string& method, json params) {
  return {{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}};
}

namespace {
/// Deepest nesting of [ and { outside strings. nlohmann's parser is iterative, but copying
/// and destroying a value recurse: 200 000 nested arrays overflow the stack (SIGSEGV), so
/// depth is checked on the text before anything is built.
int nesting_depth(const std::string& s, int limit) {
  int depth = 0, worst = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      worst = std::max(worst, ++depth);
      if (worst > limit) return worst;
    } else if (c == ']' || c == '}') --depth;
  }
  return worst;
}
}  // namespace

Request parse_request(const std::string& line, json* id_seen) {
  if (nesting_depth(line, kMaxDepth) > kMaxDepth)
    throw RpcError(kInvalidRequest, "request nested deeper than " + std::to_string(kMaxDepth) +
                                        " levels of [ and {: refused before parsing");
  json j;
  try {
    j = json::parse(line);
  } catch (const json::parse_error& e) {
    throw RpcError(kParseError, std::string("not JSON: ") + e.what());
  } catch (const json::exception& e) {  // a number out of range (1e400): not JSON we can read
    throw RpcError(kParseError, std::string("not JSON: ") + e.what());
  }
  if (!j.is_object()) throw RpcError(kInvalidRequest, "a request is a JSON object, got " + std::string(j.type_name()));
  Request r;
  if (auto it = j.find("id"); it != j.end()) {
    if (!(it->is_string() || it->is_number() || it->is_null()))
      throw RpcError(kInvalidRequest, "\"id\" must be a string, a number or null");
    r.id = *it;
    r.has_id = true;
    if (id_seen) *id_seen = r.id;
  }
  auto v = j.find("jsonrpc");
  if (v == j.end() || !v->is_string() || v->get<std::string>() != "2.0")
    throw RpcError(kInvalidRequest, "\"jsonrpc\" must be \"2.0\"" +
                                        (v == j.end() ? std::string(" (missing)") : ", got " + v->dump()));
  auto m = j.find("method");
  if (m == j.end() || !m->is_string()) throw RpcError(kInvalidRequest, "\"method\" must be a string");
  r.method = m->get<std::string>();
  if (auto p = j.find("params"); p != j.end()) {
    if (!p->is_object())
      throw RpcError(kInvalidParams, r.method + ": \"params\" must be an object (named parameters), got " +
                                         p->type_name());
    r.params = *p;
  }
  return r;
}

bool has_param(const json& params, const char* key) {
  auto it = params.find(key);
  return it != params.end() && !it->is_null();
}

std::string param_string(const json& params, const char* key, const std::string& method,
                         const std::string& fallback) {
  auto it = params.find(key);
  if (it == params.end() || it->is_null()) return fallback;
  if (!it->is_string())
    throw RpcError(kInvalidParams, method + ": \"" + key + "\" must be a string, got " + it->type_name());
  return it->get<std::string>();
}

std::string scalar_text(const json& v, const std::string& key, const std::string& method) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number()) return v.dump();  // nlohmann prints numbers locale-independently
  throw RpcError(kInvalidParams, method + ": \"" + key + "\" must be a string, number or boolean, got " +
                                     v.type_name());
}

}  // namespace corridorkey::serve
