// The trace writer observes a run without changing it and writes well-formed JSON.
#include "sim/chrome_trace.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "schedules/generate.hpp"
#include "sim/engine.hpp"
#include "tests/sim/sim_fixtures.hpp"
#include "topology/loader.hpp"
#include "topology/routing.hpp"

using namespace collsim;
using namespace collsim::sim::testing;

TEST_CASE("the Chrome trace has one slice per op and link load counters", "[sim][trace]") {
  topo::Topology t;
  const auto a = add_gpu(t, "gpu\"0");  // a quote in a name must be escaped
  const auto b = add_gpu(t, "gpu1");
  add_duplex(t, a, b, 10e9, 0);
  topo::finalize(t);
  topo::Router router(t);
  sched::Plan plan;
  plan.rank_gpu = {a, b};
  // 10 MB at 10 GB/s: the transfer lasts 1000 us and the link carries 10 GB/s meanwhile.
  const auto pair = add_transfer(plan, 0, 1, 10'000'000);
  plan.add(sched::Op{sched::OpKind::delay, 1, 1, 0, {}, {}, {}, sched::kNoRank, 0.0005});

  const auto plain = sim::simulate(router, plan);
  sim::ChromeTrace trace;
  sim::Options o;
  o.observer = &trace;
  const auto traced = sim::simulate(router, plan, o);
  CHECK(traced.time == plain.time);
  CHECK(traced.events == plain.events);

  std::ostringstream out;
  trace.write(out);
  const auto doc = nlohmann::json::parse(out.str());
  const auto& events = doc.at("traceEvents");
  int slices = 0, counters = 0;
  bool named_gpu0 = false;
  double send_dur = -1, peak = 0;
  for (const auto& e : events) {
    const auto ph = e.at("ph").get<std::string>();
    if (ph == "X") {
      ++slices;
      if (e.at("args").at("op") == pair.send) send_dur = e.at("dur").get<double>();
    }
    if (ph == "C") {
      ++counters;
      peak = std::max(peak, e.at("args").at("GB/s").get<double>());
    }
    if (ph == "M" && e.at("name") == "process_name" &&
        e.at("args").at("name").get<std::string>().find("gpu\"0 (rank 0)") == 0)
      named_gpu0 = true;
  }
  CHECK(slices == 3);
  CHECK(send_dur == Approx(1000.0));
  CHECK(counters == 2);  // the link goes to 10 GB/s, then back to 0
  CHECK(peak == Approx(10.0));
  CHECK(named_gpu0);
}

TEST_CASE("a trace kept to some GPUs holds their ops and their servers' resources only",
          "[sim][trace]") {
  const topo::Topology t =
      topo::load_topology(std::string(COLLSIM_SOURCE_DIR) + "/configs/hetero-rack.json");
  const topo::Router router(t);
  sched::PlanRequest req;
  req.algorithm = sched::Algorithm::ring;
  req.size = std::uint64_t{4} << 20;
  req.chunks = 2;
  const sched::Plan plan = sched::generate(router, req);
  const auto traced = [&](std::vector<topo::NodeId> keep) {
    sim::ChromeTrace trace;
    trace.keep_only(std::move(keep));
    sim::Options o;
    o.observer = &trace;
    sim::simulate(router, plan, o);
    std::ostringstream out;
    trace.write(out);
    return nlohmann::json::parse(out.str()).at("traceEvents");
  };
  const auto all = traced({});
  const topo::NodeId gpu0 = t.gpus()[0];  // hgx0/gpu0, rank 0
  const auto kept = traced({gpu0});
  const auto slices_of_rank0 = [&](const nlohmann::json& events) {
    std::vector<std::string> out;
    for (const auto& e : events)
      if (e.at("ph") == "X" && e.at("pid") == gpu0 + 1) out.push_back(e.dump());
    return out;
  };
  std::size_t slices = 0, counters = 0, other_counters = 0, into_hgx0 = 0;
  for (const auto& e : kept) {
    if (e.at("ph") == "X") {
      ++slices;
      CHECK(e.at("pid") == gpu0 + 1);
    }
    if (e.at("ph") == "C") {
      ++counters;
      // Every counter is a link into or out of hgx0, or one of its nodes' memories.
      const auto name = e.at("name").get<std::string>();
      CHECK(name.find("hgx0/") != std::string::npos);
      // Links from outside into hgx0 (the rack switch to its NIC) are kept too.
      into_hgx0 += name.rfind("hgx0/", 0) != 0;
    }
  }
  std::size_t all_slices = 0;
  for (const auto& e : all) {
    all_slices += e.at("ph") == "X";
    if (e.at("ph") == "C" && e.at("name").get<std::string>().find("hgx0/") == std::string::npos)
      ++other_counters;
  }
  // Rank 0's slices are those of the whole trace, to the character; the rest is left out.
  CHECK(slices > 0);
  CHECK(slices_of_rank0(kept) == slices_of_rank0(all));
  // A ring: every rank runs as many ops, or more where it stages through host memory.
  CHECK(slices * 16 <= all_slices);
  CHECK(counters > 0);
  CHECK(into_hgx0 > 0);
  CHECK(other_counters > 0);
}
