// JSON that review reads from others: run.json files under the roots and request bodies.
// nlohmann's parser itself is iterative, but its dump() and the page's own use recurse, so
// a file of 200 000 nested brackets took the server down (SIGSEGV) when the page opened the
// clip. Everything is parsed with a nesting limit, and a run.json reaches the page only as
// the fields the page knows, each of its own type.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace corridorkey::review {

/// Deeper than any file or request review reads (run.json nests 3 levels).
constexpr int kMaxJsonDepth = 32;

/// `text` parsed, or a discarded value with `error` set (not JSON, or nested deeper than
/// kMaxJsonDepth).
nlohmann::json parse_json_limited(const std::string& text, std::string& error);

/// The fields of a run.json the page and the keys use, each only when it has the type the
/// engine writes (strings, numbers, booleans; frame_times and failures as lists of flat
/// objects); anything else is left out.
nlohmann::json run_summary(const nlohmann::json& run);

}  // namespace corridorkey::review
