// ArrayStream: the elements of one top-level array handed over as they are parsed give back the
// document nlohmann builds whole, and nothing is handed over from a text that is not valid.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "topology/json_reader.hpp"

using namespace collsim;
using namespace collsim::topo::json_io;

namespace {

struct Streamed {
  std::optional<json> doc;
  std::vector<json> elements;
  std::vector<std::size_t> indices;
  std::map<std::string, std::size_t, std::less<>> lengths;  // as seen by the first element
  bool failed = false;
};

Streamed stream_of(const std::string& text, std::string_view key) {
  Streamed s;
  ArrayStream stream;
  stream.key = key;
  stream.element = [&](json&& element, std::size_t index) {
    if (s.elements.empty()) s.lengths = stream.lengths;
    s.elements.push_back(std::move(element));
    s.indices.push_back(index);
  };
  DiagnosticSink sink("t.json");
  s.doc = parse_document(text, sink, kTopologyDocument, &stream);
  s.failed = !sink.empty();
  return s;
}

}  // namespace

TEST_CASE("a streamed array's elements rebuild the document", "[json]") {
  const std::vector<std::string> texts = {
      R"({"ops": [{"a": 1, "b": [1, 2, {"ops": [3]}]}, 2, "x", null, [4, [5]], {"c": -1.5}],
          "ranks": ["g0", "g1", "g2"], "name": "t"})",
      R"({"ranks": [], "ops": [], "more": {"ops": [1, 2]}})",
      R"({"name": "t", "ops": [true, false, {"deep": {"deeper": [{"x": 1e300}]}}], "tail": [1]})",
      R"({"ops": 7, "nested": [[1], [2]]})", R"([{"ops": [1, 2]}])"};
  for (const std::string& text : texts) {
    INFO(text);
    DiagnosticSink sink("t.json");
    const auto whole = parse_document(text, sink, kTopologyDocument);
    REQUIRE(whole);
    const Streamed s = stream_of(text, "ops");
    REQUIRE_FALSE(s.failed);
    REQUIRE(s.doc);
    json rebuilt = *s.doc;
    if (whole->is_object() && whole->contains("ops") && (*whole)["ops"].is_array()) {
      // Left in the document, empty, and handed over in order.
      CHECK((*s.doc)["ops"] == json::array());
      for (std::size_t i = 0; i < s.indices.size(); ++i) CHECK(s.indices[i] == i);
      rebuilt["ops"] = json(s.elements);
      CHECK(s.elements.size() == (*whole)["ops"].size());
    } else {
      CHECK(s.elements.empty());
    }
    CHECK(rebuilt == *whole);
  }
}

TEST_CASE("a streamed array's consumer knows every top-level array's length first", "[json]") {
  // "ranks" comes after "ops": its length is known before the first op all the same.
  const Streamed s = stream_of(R"({"ops": [{}, {}, {}], "ranks": [1, 2], "x": {"y": [1]}})", "ops");
  REQUIRE(s.elements.size() == 3);
  CHECK(s.lengths.at("ops") == 3);
  CHECK(s.lengths.at("ranks") == 2);
  CHECK(s.lengths.count("y") == 0);  // not an array of the top-level object
}

TEST_CASE("nothing is streamed from a text that is not valid JSON", "[json]") {
  for (const std::string& text : std::vector<std::string>{
           R"({"ops": [{"a": 1}, {"a": 2}, {"a": )", R"({"ops": [{"a": 1}], "ops": [{"a": 2}]})",
           R"({"ops": [{"a": 1, "a": 2}]})", std::string(300, '[') + std::string(300, ']')}) {
    INFO(text);
    const Streamed s = stream_of(text, "ops");
    CHECK(s.failed);
    CHECK_FALSE(s.doc);
    CHECK(s.elements.empty());
  }
}
