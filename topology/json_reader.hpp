#pragma once
// Reading JSON objects with diagnostics: every problem goes to a DiagnosticSink with its JSON
// pointer, and reading goes on so that one run reports everything. Internal to the loaders.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "topology/error.hpp"

namespace collsim::topo::json_io {

using nlohmann::json;

std::string pointer(std::string_view base, std::string_view key);  // escapes ~ and /
std::string pointer(std::string_view base, std::size_t index);
// "number 25", "string \"x\"", "an object", ... for "found ..." in messages.
std::string describe(const json& value);
std::size_t edit_distance(std::string_view a, std::string_view b);
// " (did you mean \"x\"?)" for the closest candidate within a small edit distance, else "".
std::string suggest(std::string_view found, std::span<const std::string_view> candidates);
std::string suggest(std::string_view found, std::span<const std::string> candidates);

// What a loader expects, for the messages about a file that is not that at all (empty, a
// directory): a noun ("topology") and an example of the document and of a file.
struct Expected {
  std::string_view noun;     // "topology", "plan", "calibration"
  std::string_view example;  // "{\"name\": \"box\", ...} (docs/topology-format.md)"
  std::string_view file;     // "configs/dgx-h100.json"
};
inline constexpr Expected kTopologyDocument = {
    "topology", R"({"name": "box", "nodes": [...], "links": [...]} (docs/topology-format.md))",
    "configs/dgx-h100.json"};

// The elements of one top-level array handed over one at a time as they are parsed, instead of
// being kept in the document: a plan's millions of ops never exist as one tree, which took
// about 1.6 kB per op.
struct ArrayStream {
  std::string_view key;  // the array is the value of this key of the top-level object
  // Called with each element in order, once the whole text is known to be valid JSON; the
  // document returned keeps the array, empty.
  std::function<void(json&& element, std::size_t index)> element;
  // Set before the first element: the length of every array of the top-level object, by key,
  // for checks that need a length the text may give only after the elements.
  std::map<std::string, std::size_t, std::less<>> lengths;
};

// Parses `text`, reporting syntax errors with line and column, duplicate keys with their JSON
// pointer, and text that is not JSON at all (binary, empty). Returns nullopt after reporting
// (with a stream, duplicate keys too); then no element has been streamed.
std::optional<json> parse_document(std::string_view text, DiagnosticSink& sink,
                                   const Expected& expected, ArrayStream* stream = nullptr);

// Reads the text of a file for parse_document; missing files, directories and unreadable files
// become an InputError naming the path.
std::string read_text_file(const std::string& path, const Expected& expected);

// One JSON object being read. Fields are looked up by name; `finish()` then reports the keys
// that were never asked for, with a did-you-mean over `allowed`.
class ObjectReader {
 public:
  // Reports and yields an empty reader (ok() false) when `value` is not an object.
  ObjectReader(const json& value, std::string ptr, DiagnosticSink& sink, std::string_view what);
  bool ok() const { return object_ != nullptr; }
  const std::string& ptr() const { return ptr_; }
  std::string ptr(std::string_view key) const { return pointer(ptr_, key); }
  DiagnosticSink& sink() const { return sink_; }

  bool has(std::string_view key) const;
  const json* get(std::string_view key) const;  // nullptr if absent

  std::optional<std::string> string(std::string_view key, bool required = false) const;
  std::optional<bool> boolean(std::string_view key) const;
  std::optional<std::int64_t> integer(std::string_view key, std::int64_t min, std::int64_t max,
                                      bool required = false) const;
  std::optional<double> bandwidth(std::string_view key) const;
  std::optional<double> duration(std::string_view key) const;
  // A positive ratio written as a number (2) or as "2:1".
  std::optional<double> ratio(std::string_view key) const;
  // Reports a missing required key.
  void missing(std::string_view key, std::string_view expected) const;
  void error(std::string_view key, std::string message) const;

  // Reports every key not in `allowed`; "comment" and "sources" are always allowed (citations)
  // and must be a string or an array of strings.
  void check_keys(std::initializer_list<std::string_view> allowed) const {
    check_keys(std::span<const std::string_view>(allowed.begin(), allowed.size()));
  }
  void check_keys(std::span<const std::string_view> allowed) const;

 private:
  const json* object_ = nullptr;
  std::string ptr_;
  DiagnosticSink& sink_;
  std::string what_;
};

}  // namespace collsim::topo::json_io
