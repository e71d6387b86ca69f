#include "serve/rpc.h"

#include "event_stream.h"

#include <corridorkey/errors.h>

#include <corridorkey/option_fields.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <vector>

namespace corridorkey::serve {

using nlohmann::json;

std::string escape_controls(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

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
  // Engine errors quote file names and values the client sent: their control characters
  // (a terminal escape in a name) are written out as RpcError's are.
  return {{"code", code}, {"message", escape_controls(e.what())}, {"data", {{"kind", kind}, {"exit_code", c.exit_code}}}};
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
  // A key given twice in one object is refused, at any depth: nlohmann keeps the last one, so
  // {"method":"engine.info","method":"server.shutdown"} shut the server down.
  std::vector<std::set<std::string>> keys;  // one set per open object
  std::string duplicate;
  auto check_keys = [&](int, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::object_start) keys.emplace_back();
    else if (ev == json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    else if (ev == json::parse_event_t::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second &&
             duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  try {
    j = json::parse(line, check_keys);
  } catch (const json::parse_error& e) {
    throw RpcError(kParseError, std::string("not JSON: ") + e.what());
  } catch (const json::exception& e) {  // a number out of range (1e400): not JSON we can read
    throw RpcError(kParseError, std::string("not JSON: ") + e.what());
  }
  // The reply to a refused request carries its id where the id is unambiguous (a client
  // matches replies by id): not when "id" itself is the key given twice.
  if (!duplicate.empty()) {
    if (id_seen && duplicate != "id" && j.is_object())
      if (auto it = j.find("id"); it != j.end() && (it->is_string() || it->is_number())) *id_seen = *it;
    throw RpcError(kInvalidRequest, "key \"" + printable(duplicate) + "\" appears twice in one object; give each key once");
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

namespace {
/// Every option field's kind by key (engine and inference tables), with what it allows.
const std::map<std::string, OptionInfo>& option_infos() {
  static const std::map<std::string, OptionInfo> m = [] {
    std::map<std::string, OptionInfo> out;
    for (const auto& f : engine_option_fields()) out.emplace(f.key, f);
    for (const auto& f : inference_option_fields()) out.emplace(f.key, f);
    return out;
  }();
  return m;
}
}  // namespace

std::string scalar_text(const json& v, const std::string& key, const std::string& method) {
  // The JSON type must be the field's: "despill": "5" is a string where a number is due, and
  // was taken as 5 (the protocol says wrong types get -32602).
  const auto& infos = option_infos();
  const auto it = infos.find(key == "precision" ? "model_precision" : key);
  const OptionKind kind = it == infos.end() ? OptionKind::Text : it->second.kind;
  const std::string allowed = it == infos.end() ? std::string() : it->second.allowed;
  auto wrong = [&](const char* expected) {
    return RpcError(kInvalidParams, method + ": \"" + printable(key) + "\" must be " + expected +
                                        (allowed.empty() ? "" : " (" + allowed + ")") + ", got " + v.type_name());
  };
  switch (kind) {
    case OptionKind::Switch:
      if (!v.is_boolean()) throw wrong("a boolean");
      return v.get<bool>() ? "true" : "false";
    case OptionKind::Integer:
      if (!v.is_number_integer()) throw wrong("an integer");
      return v.dump();  // nlohmann prints numbers locale-independently
    case OptionKind::Real:
      if (!v.is_number()) throw wrong("a number");
      return v.dump();
    case OptionKind::Size:
      if (v.is_number_integer()) return v.dump();
      if (!v.is_string()) throw wrong("an integer or a percentage as a string (\"50%\")");
      return v.get<std::string>();
    case OptionKind::Choice:
      // Tri-state switches (native_attention, tiled_refiner...) also take true / false.
      if (v.is_boolean() && allowed.find("true") != std::string::npos) return v.get<bool>() ? "true" : "false";
      if (!v.is_string()) throw wrong("a string");
      return v.get<std::string>();
    case OptionKind::Text:
      break;
  }
  if (!v.is_string()) throw wrong("a string");
  return v.get<std::string>();
}

std::string printable(const std::string& s, std::size_t max) {
  // Control characters, NUL among them (it cut an error message short), as JSON escapes; long
  // values cut, so an echoed name never floods a reply or a log.
  std::string out;
  for (unsigned char c : s) {
    if (out.size() >= max) {
      out += "...";
      break;
    }
    if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace corridorkey::serve
