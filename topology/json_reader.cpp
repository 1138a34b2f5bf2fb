#include "topology/json_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "topology/units.hpp"

namespace collsim::topo::json_io {

std::string pointer(std::string_view base, std::string_view key) {
  std::string out(base);
  out += '/';
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::string pointer(std::string_view base, std::size_t index) {
  return std::string(base) + "/" + std::to_string(index);
}

std::string describe(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return v.get<bool>() ? "true" : "false";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return "number " + v.dump();
    case json::value_t::string: {
      std::string s = v.get<std::string>();
      if (s.size() > 60) {
        // Cut on a code point boundary: half a UTF-8 sequence cannot be dumped.
        std::size_t cut = 57;
        while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
        s.resize(cut);
        s += "...";
      }
      return "string " + json(s).dump(-1, ' ', false, json::error_handler_t::replace);
    }
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    default:
      return "a value of unknown type";
  }
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

namespace {
template <class Range>
std::string suggest_in(std::string_view found, const Range& candidates) {
  std::string_view best;
  std::size_t best_distance = std::max<std::size_t>(2, found.size() / 3) + 1;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(found, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best.empty() ? std::string() : fmt::format(" (did you mean \"{}\"?)", best);
}
}  // namespace

std::string suggest(std::string_view found, std::span<const std::string_view> candidates) {
  return suggest_in(found, candidates);
}
std::string suggest(std::string_view found, std::span<const std::string> candidates) {
  return suggest_in(found, candidates);
}

std::string read_text_file(const std::string& path, const Expected& expected) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status))
    throw InputError(path, "",
                     "file not found; check the path (relative paths start from the "
                     "current directory)");
  if (fs::is_directory(status))
    throw InputError(path, "",
                     fmt::format("is a directory; expected a JSON {} file such as {}",
                                 expected.noun, expected.file));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", "cannot be opened for reading; check its permissions");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw InputError(path, "", "could not be read");
  return std::move(buffer).str();
}

namespace {
// Real inputs nest a few levels; a hostile file of 100000 brackets must not cost memory or time
// in proportion to its depth at every level.
constexpr std::size_t kMaxDepth = 256;

std::pair<std::size_t, std::size_t> line_column(std::string_view text, std::size_t byte) {
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

// A first pass over the text without building anything: syntax errors with their position, keys
// that appear twice in one object (nlohmann keeps only the last, and a silently dropped
// parameter is worse than an error) and excessive nesting. nlohmann's callback parser would do
// the same in one pass but is quadratic in the length of an array of objects (3.11.2).
class Precheck : public json::json_sax_t {
 public:
  explicit Precheck(DiagnosticSink& sink) : sink_(sink) {}
  bool too_deep = false;
  bool syntax_error = false;
  std::size_t duplicates = 0;
  std::map<std::string, std::size_t, std::less<>> lengths;
  std::size_t error_byte = 0;
  std::string error_message;

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(false); }
  bool start_array(std::size_t) override { return open(true); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    Frame& top = stack_.back();
    top.key = k;
    if (!top.keys.insert(k).second) {
      ++duplicates;
      sink_.error(pointer(path(), k),
                  fmt::format("key \"{}\" appears twice in the same object; keep one", k));
    }
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    syntax_error = true;
    error_byte = position;
    error_message = ex.what();
    return false;
  }

 private:
  struct Frame {
    bool is_array = false;
    std::size_t index = 0;
    std::string key;             // the last key read, in an object
    std::set<std::string> keys;  // every key read, in an object
    std::string name_in_parent;  // this container's pointer component
  };
  bool value() {
    if (!stack_.empty() && stack_.back().is_array) ++stack_.back().index;
    return true;
  }
  bool open(bool is_array) {
    if (stack_.size() >= kMaxDepth) {
      too_deep = true;
      return false;
    }
    Frame f;
    f.is_array = is_array;
    if (!stack_.empty())
      f.name_in_parent =
          stack_.back().is_array ? std::to_string(stack_.back().index) : stack_.back().key;
    stack_.push_back(std::move(f));
    return true;
  }
  bool close() {
    // An array of the top-level object: its length, for ArrayStream::lengths.
    if (stack_.size() == 2 && !stack_[0].is_array && stack_[1].is_array)
      lengths[stack_[1].name_in_parent] = stack_[1].index;
    stack_.pop_back();
    return value();
  }
  std::string path() const {  // pointer of the innermost open container
    std::string out;
    for (std::size_t i = 1; i < stack_.size(); ++i) out = pointer(out, stack_[i].name_in_parent);
    return out;
  }
  DiagnosticSink& sink_;
  std::vector<Frame> stack_;
};
// The second pass: builds the document as nlohmann's own parser would, except that each
// element of the streamed array is handed over as soon as it is complete and removed.
class StreamingBuilder : public json::json_sax_t {
 public:
  explicit StreamingBuilder(ArrayStream& stream) : stream_(stream) {}
  json root;

  bool null() override { return add(json(nullptr)); }
  bool boolean(bool b) override { return add(json(b)); }
  bool number_integer(number_integer_t v) override { return add(json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return add(json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return add(json(v)); }
  bool string(string_t& v) override { return add(json(std::move(v))); }
  bool binary(binary_t& v) override { return add(json::binary(std::move(v))); }
  bool start_object(std::size_t) override { return open(json::object()); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    // The first pass accepted the text, so this is not the user's doing.
    throw InternalError(std::string("JSON parser disagrees with its first pass: ") + e.what());
  }

 private:
  json* place(json&& v) {
    if (stack_.empty()) {
      root = std::move(v);
      return &root;
    }
    json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    json& slot = top[key_];
    slot = std::move(v);
    return &slot;
  }
  bool add(json&& v) {
    place(std::move(v));
    hand_over();
    return true;
  }
  bool open(json&& v) {
    const bool streamed =
        stack_.size() == 1 && stack_[0]->is_object() && v.is_array() && key_ == stream_.key;
    json* p = place(std::move(v));
    if (streamed) streamed_ = p;
    stack_.push_back(p);
    return true;
  }
  bool close() {
    stack_.pop_back();
    hand_over();
    return true;
  }
  // A value just completed: if it is an element of the streamed array, it goes.
  void hand_over() {
    if (streamed_ == nullptr || stack_.empty() || stack_.back() != streamed_) return;
    stream_.element(std::move(streamed_->back()), index_++);
    streamed_->erase(streamed_->size() - 1);
  }

  ArrayStream& stream_;
  std::vector<json*> stack_;
  std::string key_;
  json* streamed_ = nullptr;
  std::size_t index_ = 0;
};

}  // namespace

std::optional<json> parse_document(std::string_view text, DiagnosticSink& sink,
                                   const Expected& expected, ArrayStream* stream) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    sink.error("", fmt::format("is empty; expected a JSON {} such as {}", expected.noun,
                               expected.example));
    return std::nullopt;
  }
  if (text.find('\0') != std::string_view::npos) {
    sink.error("", "looks like a binary file (it contains NUL bytes); expected JSON text");
    return std::nullopt;
  }
  Precheck check(sink);
  json::sax_parse(text.begin(), text.end(), &check, json::input_format_t::json, true, false);
  if (check.too_deep) {
    sink.error("", fmt::format("arrays and objects are nested more than {} levels deep; expected "
                               "a few levels (check for unbalanced brackets)",
                               kMaxDepth));
    return std::nullopt;
  }
  if (check.syntax_error) {
    const auto [line, column] = line_column(text, check.error_byte == 0 ? 0 : check.error_byte - 1);
    std::string message = check.error_message;
    // nlohmann's text is "[json.exception.parse_error.101] parse error at line L, column C: why".
    if (const auto at = message.find("column "); at != std::string::npos) {
      if (const auto colon = message.find(": ", at); colon != std::string::npos)
        message = message.substr(colon + 2);
    } else if (message.rfind("[json.exception.", 0) == 0) {
      if (const auto close = message.find("] "); close != std::string::npos)
        message = message.substr(close + 2);
    }
    sink.error(fmt::format("line {}, column {}", line, column),
               "invalid JSON: " + message +
                   "; expected a JSON object (check commas, quotes and brackets near this "
                   "position)");
    return std::nullopt;
  }
  if (stream != nullptr) {
    // Which of two equal keys holds the streamed array would be a guess, and the lengths
    // counted would not be those of the elements handed over.
    if (check.duplicates > 0) return std::nullopt;
    stream->lengths = std::move(check.lengths);
    StreamingBuilder builder(*stream);
    json::sax_parse(text.begin(), text.end(), &builder, json::input_format_t::json, true, false);
    return std::move(builder.root);
  }
  try {
    return json::parse(text.begin(), text.end(), nullptr, true, false);
  } catch (const json::exception& e) {
    // The first pass accepted the text, so this is not the user's doing.
    throw InternalError(std::string("JSON parser disagrees with its first pass: ") + e.what());
  }
}

ObjectReader::ObjectReader(const json& value, std::string ptr, DiagnosticSink& sink,
                           std::string_view what)
    : ptr_(std::move(ptr)), sink_(sink), what_(what) {
  if (value.is_object())
    object_ = &value;
  else
    sink_.error(ptr_.empty() ? "/" : ptr_,
                fmt::format("expected {} (a JSON object); found {}", what, describe(value)));
}

bool ObjectReader::has(std::string_view key) const {
  return get(key) != nullptr;
}

const json* ObjectReader::get(std::string_view key) const {
  if (object_ == nullptr) return nullptr;
  const auto it = object_->find(key);
  return it == object_->end() ? nullptr : &*it;
}

void ObjectReader::missing(std::string_view key, std::string_view expected) const {
  sink_.error(ptr(key),
              fmt::format("{} is missing the required key \"{}\" ({})", what_, key, expected));
}

void ObjectReader::error(std::string_view key, std::string message) const {
  sink_.error(ptr(key), std::move(message));
}

std::optional<std::string> ObjectReader::string(std::string_view key, bool required) const {
  const json* v = get(key);
  if (v == nullptr) {
    if (required && ok()) missing(key, "a string");
    return std::nullopt;
  }
  if (!v->is_string()) {
    error(key, fmt::format("expected a string; found {}", describe(*v)));
    return std::nullopt;
  }
  return v->get<std::string>();
}

std::optional<bool> ObjectReader::boolean(std::string_view key) const {
  const json* v = get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) {
    error(key, fmt::format("expected true or false; found {}", describe(*v)));
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<std::int64_t> ObjectReader::integer(std::string_view key, std::int64_t min,
                                                  std::int64_t max, bool required) const {
  const json* v = get(key);
  if (v == nullptr) {
    if (required && ok()) missing(key, fmt::format("an integer from {} to {}", min, max));
    return std::nullopt;
  }
  const bool integral = v->is_number_integer() || v->is_number_unsigned();
  if (!integral) {
    error(key, fmt::format("expected an integer from {} to {}; found {}", min, max, describe(*v)));
    return std::nullopt;
  }
  if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(max)) {
    error(key, fmt::format("expected an integer from {} to {}; found {}", min, max, v->dump()));
    return std::nullopt;
  }
  const auto x = v->get<std::int64_t>();
  if (x < min || x > max) {
    error(key, fmt::format("expected an integer from {} to {}; found {}", min, max, x));
    return std::nullopt;
  }
  return x;
}

namespace {
template <class Parse>
std::optional<double> quantity(const ObjectReader& r, std::string_view key, Parse parse,
                               std::string_view unit_example) {
  const json* v = r.get(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_number()) {
    r.error(key, fmt::format("found the bare number {}; quantities are strings with a unit, "
                             "e.g. \"{}{}\"",
                             v->dump(), v->dump(), unit_example));
    return std::nullopt;
  }
  if (!v->is_string()) {
    r.error(key, fmt::format("expected a string with a unit such as \"25{}\"; found {}",
                             unit_example, describe(*v)));
    return std::nullopt;
  }
  try {
    return parse(v->get<std::string>());
  } catch (const UnitError& e) {
    r.error(key, e.what());
    return std::nullopt;
  }
}
}  // namespace

std::optional<double> ObjectReader::bandwidth(std::string_view key) const {
  return quantity(
      *this, key, [](const std::string& s) { return parse_bandwidth(s); }, "GB/s");
}

std::optional<double> ObjectReader::duration(std::string_view key) const {
  return quantity(
      *this, key, [](const std::string& s) { return parse_duration(s); }, "us");
}

std::optional<double> ObjectReader::ratio(std::string_view key) const {
  const json* v = get(key);
  if (v == nullptr) return std::nullopt;
  double x = 0;
  if (v->is_number()) {
    x = v->get<double>();
  } else if (v->is_string()) {
    const std::string s = v->get<std::string>();
    double a = 0, b = 0;
    char colon = 0;
    std::istringstream in(s);
    if (!(in >> a >> colon >> b) || colon != ':' || !in.eof() || !(b > 0)) {
      error(key, fmt::format("expected a ratio such as 2 or \"2:1\"; found {}", describe(*v)));
      return std::nullopt;
    }
    x = a / b;
  } else {
    error(key, fmt::format("expected a ratio such as 2 or \"2:1\"; found {}", describe(*v)));
    return std::nullopt;
  }
  if (!(x > 0) || !(x <= 1e6)) {
    error(key, fmt::format("ratio must be positive and at most 1e6; found {}", v->dump()));
    return std::nullopt;
  }
  return x;
}

void ObjectReader::check_keys(std::span<const std::string_view> allowed) const {
  if (object_ == nullptr) return;
  std::vector<std::string_view> all(allowed.begin(), allowed.end());
  all.emplace_back("comment");
  all.emplace_back("sources");
  for (const auto& [key, value] : object_->items()) {
    if (key == "comment" || key == "sources") {
      bool fine = value.is_string();
      if (value.is_array())
        fine = std::all_of(value.begin(), value.end(), [](const json& e) { return e.is_string(); });
      if (!fine)
        error(key, fmt::format("\"{}\" holds citations as a string or an array of strings; "
                               "found {}",
                               key, describe(value)));
      continue;
    }
    if (std::find(all.begin(), all.end(), key) == all.end()) {
      std::string known;
      for (std::string_view a : allowed) known += (known.empty() ? "" : ", ") + std::string(a);
      error(key, fmt::format("unknown key \"{}\" in {}{}; known keys: {}", key, what_,
                             suggest(key, std::span<const std::string_view>(all)), known));
    }
  }
}

}  // namespace collsim::topo::json_io
