// Plan JSON: a generated plan survives a round trip op for op, byte for byte; bad files are
// refused with the JSON pointer of the problem. MSCCL XML import: the shipped examples import
// and verify; malformed XML names its line.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "schedules/generate.hpp"
#include "schedules/msccl_import.hpp"
#include "schedules/plan_json.hpp"
#include "schedules/verify.hpp"
#include "tests/schedules/fixtures.hpp"
#include "topology/error.hpp"
#include "topology/routing.hpp"

using namespace collsim;
using namespace collsim::sched;
using nlohmann::json;

namespace {

std::string to_json(const Plan& p, const topo::Topology* t) {
  std::ostringstream s;
  write_plan(s, p, t);
  return s.str();
}

std::string error_of(const std::string& text) {
  try {
    parse_plan(text, "plan.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

const std::string kHead =
    R"({"format":"collsim-plan","version":1,"collective":"allreduce","size_bytes":8,"ranks":[null,null],"ops":)";

}  // namespace

TEST_CASE("plan JSON round trip", "[plan_json]") {
  topo::Topology t = test::uniform_gpus(3, {});
  topo::finalize(t);
  const Plan a = test::plan_on(t, Algorithm::tree, 2, 3 * 2 * 4 * 5);
  const std::string text = to_json(a, &t);
  const Plan b = parse_plan(text, "mem.json", &t);
  REQUIRE(b.num_ops() == a.num_ops());
  CHECK(b.rank_gpu == a.rank_gpu);
  for (OpId id = 0; id < a.num_ops(); ++id) {
    CHECK(b.kind(id) == a.kind(id));
    CHECK(b.partner(id) == a.partner(id));
    CHECK(std::vector<OpId>(b.deps(id).begin(), b.deps(id).end()) ==
          std::vector<OpId>(a.deps(id).begin(), a.deps(id).end()));
  }
  CHECK(to_json(b, &t) == text);
  CHECK(verify(b).ok());
  // A pinned host buffer is the default and is not written; a pageable one is, and survives.
  CHECK(text.find("host_memory") == std::string::npos);
  CHECK(b.host_memory == HostMemory::pinned);
  Plan d = parse_plan(text, "mem.json", &t);
  d.host_memory = HostMemory::pageable;
  const std::string pageable = to_json(d, &t);
  CHECK(pageable.find("\"host_memory\":\"pageable\"") != std::string::npos);
  CHECK(parse_plan(pageable, "mem.json", &t).host_memory == HostMemory::pageable);
  // Without a topology the ranks keep no GPU, but the plan still verifies.
  const Plan c = parse_plan(text, "mem.json");
  CHECK(c.rank_gpu[0] == topo::kNoNode);
  CHECK(verify(c).ok());
}

TEST_CASE("a plan reads the same whatever the order of its keys", "[plan_json]") {
  // Ops are read as the parser reaches them: "ranks" after "ops" must still give each op's
  // checks the plan's rank count, and the same plan.
  topo::Topology t = test::uniform_gpus(3, {});
  topo::finalize(t);
  const Plan a = test::plan_on(t, Algorithm::ring, 2, 3 * 2 * 4 * 5);
  json doc = json::parse(to_json(a, &t));
  // nlohmann's objects sort their keys; written by hand, "ops" comes first.
  std::string text = "{\"ops\":" + doc["ops"].dump();
  for (const auto& [key, value] : doc.items())
    if (key != "ops") text += ",\"" + key + "\":" + value.dump();
  text += "}";
  REQUIRE(text.find("\"ops\"") < text.find("\"ranks\""));
  CHECK(to_json(parse_plan(text, "mem.json", &t), &t) == to_json(a, &t));
  // A rank out of range is measured against the ranks listed after the ops.
  const std::string late_ranks =
      R"({"format":"collsim-plan","version":1,"collective":"allreduce","size_bytes":8,"ops":[{"kind":"delay","rank":2,"seconds":1}],"ranks":[null,null]})";
  const auto e = error_of(late_ranks);
  INFO(e);
  CHECK(e.find("/ops/0/rank: found 2; the plan has ranks 0..1") != std::string::npos);
}

TEST_CASE("plan JSON errors name the op and field", "[plan_json]") {
  CHECK(error_of("{").find("plan.json") != std::string::npos);
  const std::string unknown_rank =
      kHead +
      R"([{"kind":"send","rank":2,"peer":1,"bytes":8,"src":{"buffer":"input","offset":0},"match":1},
                  {"kind":"recv","rank":1,"peer":0,"bytes":8,"dst":{"buffer":"output","offset":0},"match":0}]})";
  const auto e1 = error_of(unknown_rank);
  INFO(e1);
  CHECK(e1.find("/ops/0/rank") != std::string::npos);
  const std::string wrong_kind =
      kHead +
      R"([{"kind":"send","rank":0,"peer":1,"bytes":8,"src":{"buffer":"input","offset":0},"match":1},
                  {"kind":"send","rank":1,"peer":0,"bytes":8,"src":{"buffer":"input","offset":0},"match":0}]})";
  const auto e2 = error_of(wrong_kind);
  INFO(e2);
  CHECK(e2.find("/ops/0/match") != std::string::npos);
  CHECK(e2.find("must match a recv") != std::string::npos);
  const std::string bad_dep = kHead + R"([{"kind":"delay","rank":0,"seconds":1,"deps":[7]}]})";
  const auto e3 = error_of(bad_dep);
  INFO(e3);
  CHECK(e3.find("/ops/0/deps/0") != std::string::npos);
  const std::string bad_buffer =
      kHead +
      R"([{"kind":"copy","rank":0,"bytes":8,"src":{"buffer":"inptu","offset":0},"dst":{"buffer":"output","offset":0}}]})";
  const auto e4 = error_of(bad_buffer);
  INFO(e4);
  CHECK(e4.find("/ops/0/src/buffer") != std::string::npos);
  const std::string missing_match =
      kHead +
      R"([{"kind":"send","rank":0,"peer":1,"bytes":8,"src":{"buffer":"input","offset":0}}]})";
  CHECK(error_of(missing_match).find("/ops/0/match") != std::string::npos);
  std::string bad_memory = kHead + R"([{"kind":"delay","rank":0,"seconds":1}]})";
  bad_memory.insert(1, R"("host_memory":"swapped",)");
  const auto e5 = error_of(bad_memory);
  INFO(e5);
  CHECK(e5.find("/host_memory") != std::string::npos);
  CHECK(e5.find("expected pinned or pageable") != std::string::npos);
}

TEST_CASE("an op's own mistake is not reported again by the matching of its pair", "[plan_json]") {
  // The recv's "bytes" is a string: one error, not also "moves 0 bytes" from each end.
  const std::string text =
      kHead +
      R"([{"kind":"send","rank":0,"peer":1,"bytes":8,"src":{"buffer":"input","offset":0},"match":1},
                  {"kind":"recv","rank":1,"peer":0,"bytes":"8","dst":{"buffer":"output","offset":0},"match":0}]})";
  const auto e = error_of(text);
  INFO(e);
  CHECK(e.find("/ops/1/bytes") != std::string::npos);
  CHECK(e.find("/match") == std::string::npos);
  // Two well-formed ops that do not pair are still reported.
  const std::string unpaired =
      kHead +
      R"([{"kind":"send","rank":0,"peer":1,"bytes":8,"src":{"buffer":"input","offset":0},"match":1},
                  {"kind":"recv","rank":1,"peer":0,"bytes":16,"dst":{"buffer":"output","offset":0},"match":0}]})";
  CHECK(error_of(unpaired).find("/ops/0/match: op 1 moves 16 bytes, this op 8") !=
        std::string::npos);
}

TEST_CASE("a plan with a mistake in every op reports the first few and counts the rest",
          "[plan_json]") {
  // A top-level mistake, then 1000 ops each with a negative duration: the top level's problem
  // comes first, then the first ops' up to DiagnosticSink::kShown in all, then the count.
  std::string text = kHead + "[";
  for (int i = 0; i < 1000; ++i)
    text += std::string(i ? "," : "") + R"({"kind":"delay","rank":0,"seconds":-1})";
  text += "]}";
  text.insert(1, R"("host_memory":"swapped",)");
  try {
    parse_plan(text, "plan.json");
    FAIL("accepted");
  } catch (const InputError& e) {
    const auto& d = e.diagnostics();
    REQUIRE(d.size() == DiagnosticSink::kShown + 1);
    CHECK(d.front().where == "/host_memory");
    for (std::size_t i = 1; i < DiagnosticSink::kShown; ++i) {
      INFO(i);
      CHECK(d[i].where == "/ops/" + std::to_string(i - 1) + "/seconds");
    }
    CHECK(d.back().file == "plan.json");
    CHECK(d.back().message == "981 more problems not shown; fix the ones above and run again");
  }
}

TEST_CASE("a diagnostic sink shows its first problems and counts the rest", "[plan_json]") {
  // The engine reports a plan's problems straight into one sink (no append), 25 of them here.
  DiagnosticSink sink("plan.json");
  for (int i = 0; i < 25; ++i) sink.error("/ops/" + std::to_string(i), "bad");
  CHECK(sink.full());
  try {
    sink.throw_if_any();
    FAIL("nothing thrown");
  } catch (const InputError& e) {
    const auto& d = e.diagnostics();
    REQUIRE(d.size() == DiagnosticSink::kShown + 1);
    CHECK(d[DiagnosticSink::kShown - 1].where == "/ops/19");
    CHECK(d.back().message == "5 more problems not shown; fix the ones above and run again");
  }
}

TEST_CASE("a rank's streams are counted up to the last stream id a plan may use", "[plan_json]") {
  const Plan plan = parse_plan(kHead + R"([{"kind":"delay","rank":0,"seconds":1,"stream":65535},)" +
                                   R"({"kind":"delay","rank":0,"seconds":1,"stream":3}]})",
                               "plan.json");
  CHECK(plan.streams_per_rank() == std::vector<std::uint32_t>{65536, 0});
}

TEST_CASE("the shipped MSCCL examples import and verify", "[msccl]") {
  const std::string dir = std::string(COLLSIM_SOURCE_DIR) + "/configs/msccl/";
  const Plan ring = import_msccl(dir + "ring-allreduce-4.xml", 4 * 1024);
  CHECK(ring.num_ranks() == 4);
  CHECK(ring.collective == Collective::allreduce);
  // 2 (p-1) = 6 transfers per GPU, p - 1 = 3 reductions per GPU.
  std::size_t sends = 0, reduces = 0;
  for (OpId id = 0; id < ring.num_ops(); ++id) {
    sends += ring.kind(id) == OpKind::send;
    reduces += ring.kind(id) == OpKind::reduce;
  }
  CHECK(sends == 24);
  CHECK(reduces == 12);
  const auto r = verify(ring);
  INFO((r.problems.empty() ? "" : r.problems.front()));
  CHECK(r.ok());
  const Plan ag = import_msccl(dir + "allgather-direct-3.xml", 3 * 256);
  CHECK(ag.collective == Collective::allgather);
  CHECK(verify(ag).ok());
}

TEST_CASE("MSCCL import errors name the line", "[msccl]") {
  auto error = [](const std::string& xml) {
    try {
      parse_msccl(xml, "a.xml", 64);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const auto e1 = error(
      "<algo name=\"x\" coll=\"allreduce\" ngpus=\"2\" nchunksperloop=\"2\">\n"
      "  <gpu id=\"0\">\n  </gpx>\n</algo>\n");
  INFO(e1);
  CHECK(e1.find("line 3") != std::string::npos);
  CHECK(e1.find("</gpx>") != std::string::npos);
  const auto e2 = error(
      "<algo coll=\"allreduce\" ngpus=\"2\" nchunksperloop=\"2\">\n"
      "<gpu id=\"0\"><tb id=\"0\" send=\"1\" recv=\"-1\">\n"
      "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\"/>\n"
      "</tb></gpu>\n<gpu id=\"1\"/>\n</algo>\n");
  INFO(e2);
  CHECK(e2.find("every send needs a receive") != std::string::npos);
  const auto e3 = error(
      "<algo coll=\"allreduce\" ngpus=\"1\" nchunksperloop=\"1\">\n"
      "<gpu id=\"0\"><tb id=\"0\">\n<step s=\"0\" type=\"zz\" srcbuf=\"i\" "
      "srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\"/>\n</tb></gpu></algo>");
  INFO(e3);
  CHECK(e3.find("line 3") != std::string::npos);
  CHECK(e3.find("unknown step type") != std::string::npos);
}

TEST_CASE("MSCCL dependencies between threadblocks become plan dependencies", "[msccl]") {
  // Allgather on 2 GPUs. GPU g's threadblock 2 copies its input into its output only after
  // threadblock 1 has received the peer's chunk (depid=1 deps=0).
  std::string xml = "<algo name=\"ag2\" coll=\"allgather\" ngpus=\"2\" nchunksperloop=\"2\">\n";
  for (int g = 0; g < 2; ++g) {
    const std::string me = std::to_string(g), peer = std::to_string(1 - g);
    xml += "<gpu id=\"" + me + "\">\n";
    xml += "<tb id=\"0\" send=\"" + peer +
           "\" recv=\"-1\"><step s=\"0\" type=\"s\" srcbuf=\"i\" "
           "srcoff=\"0\" dstbuf=\"o\" dstoff=\"" +
           me + "\" cnt=\"1\"/></tb>\n";
    xml += "<tb id=\"1\" send=\"-1\" recv=\"" + peer +
           "\"><step s=\"0\" type=\"r\" srcbuf=\"i\" "
           "srcoff=\"0\" dstbuf=\"o\" dstoff=\"" +
           peer + "\" cnt=\"1\"/></tb>\n";
    xml +=
        "<tb id=\"2\" send=\"-1\" recv=\"-1\"><step s=\"0\" type=\"cpy\" srcbuf=\"i\" "
        "srcoff=\"0\" dstbuf=\"o\" dstoff=\"" +
        me + "\" cnt=\"1\" depid=\"1\" deps=\"0\"/></tb>\n";
    xml += "</gpu>\n";
  }
  xml += "</algo>\n";
  const Plan plan = parse_msccl(xml, "ag2.xml", 2 * 64);
  REQUIRE(plan.num_ops() == 6);
  std::size_t copies_after_recv = 0;
  for (OpId id = 0; id < plan.num_ops(); ++id)
    if (plan.kind(id) == OpKind::copy)
      for (OpId d : plan.deps(id)) copies_after_recv += plan.kind(d) == OpKind::recv;
  CHECK(copies_after_recv == 2);
  CHECK(verify(plan).ok());
  // A dependency on a step that does not exist names the line of the step.
  const std::string bad =
      "<algo coll=\"allgather\" ngpus=\"1\" nchunksperloop=\"1\">\n<gpu id=\"0\">"
      "<tb id=\"0\">\n<step s=\"0\" type=\"cpy\" srcbuf=\"i\" srcoff=\"0\" "
      "dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"4\" deps=\"0\"/>\n</tb></gpu></algo>";
  try {
    parse_msccl(bad, "bad.xml", 64);
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("line 3") != std::string::npos);
    CHECK(std::string(e.what()).find("tb 4 step 0") != std::string::npos);
  }
}
