// The trace writer observes a run without changing it and writes well-formed JSON.
#include "sim/chrome_trace.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sim/engine.hpp"
#include "tests/sim/sim_fixtures.hpp"
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
