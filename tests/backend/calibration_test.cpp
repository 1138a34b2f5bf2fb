#include "cuda_backend/calibration.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cuda_backend/host_executor.hpp"
#include "schedules/generate.hpp"
#include "sim/engine.hpp"
#include "topology/error.hpp"
#include "topology/routing.hpp"

using namespace collsim;
using namespace collsim::backend;

namespace {

// Points lying exactly on t = alpha + beta x for one op kind.
void add_line(Calibration& c, const std::string& op, double alpha, double beta) {
  for (double x : {4096.0, 65536.0, 1048576.0})
    for (int rep = 0; rep < 2; ++rep) c.points.push_back({op, x, alpha + beta * x});
}

Calibration synthetic(const std::string& model) {
  Calibration c;
  c.backend = "cuda";
  c.device = "Test GPU";
  c.model = model;
  c.date = "2026-01-01T00:00:00Z";
  add_line(c, "send", 5e-6, 1.0 / 200e9);
  add_line(c, "reduce_fp32", 3e-6, 3.0 / 300e9);  // 300 GB/s of memory traffic
  add_line(c, "d2h", 8e-6, 1.0 / 12e9);
  add_line(c, "h2d", 9e-6, 1.0 / 13e9);
  add_line(c, "host", 1e-6, 1.0 / 20e9);
  add_line(c, "empty", 2e-6, 0);
  add_line(c, "event", 4.5e-6, 0);
  fit_points(c);
  return c;
}

topo::Topology small_box() {
  // cpu0 - pcie - gpu0, gpu1; both GPUs are "T4".
  topo::Topology t;
  topo::Node cpu;
  cpu.name = "cpu0";
  cpu.kind = topo::NodeKind::cpu;
  const auto c = t.add_node(cpu);
  topo::Node gpu;
  gpu.kind = topo::NodeKind::gpu;
  gpu.model = "T4";
  gpu.name = "gpu0";
  const auto g0 = t.add_node(gpu);
  gpu.name = "gpu1";
  const auto g1 = t.add_node(gpu);
  for (auto g : {g0, g1}) {
    topo::Link l;
    l.kind = topo::LinkKind::pcie;
    l.bandwidth = 16e9;
    l.from = g;
    l.to = c;
    t.add_link(l);
    l.from = c;
    l.to = g;
    t.add_link(l);
  }
  topo::finalize(t);
  return t;
}

}  // namespace

TEST_CASE("calibration: fits, JSON round trip and derived bandwidths", "[backend][calibration]") {
  const auto c = synthetic("T4");
  const OpFit* reduce = c.find("reduce_fp32");
  REQUIRE(reduce);
  CHECK(reduce->fit.alpha == Approx(3e-6));
  // traffic bandwidth = 3 bytes per byte / beta = 300 GB/s; payload = 100 GB/s.
  CHECK(reduce->traffic_bandwidth == Approx(300e9));
  CHECK(reduce->payload_bandwidth == Approx(100e9));

  const std::string text = to_json(c).dump();
  const auto back = parse_calibration(text, "mem.json");
  CHECK(back.model == "T4");
  CHECK(back.points.size() == c.points.size());
  REQUIRE(back.find("d2h"));
  CHECK(back.find("d2h")->fit.beta == Approx(1.0 / 12e9));
  CHECK(back.find("d2h")->payload_bandwidth == Approx(12e9));
}

TEST_CASE("calibration: a noisy sweep's wide confidence interval still round-trips",
          "[backend][calibration]") {
  // A loaded host once produced a delay fit whose 95% interval on beta was 6.6e6 s per unit;
  // the file calibrate wrote must be one the loader accepts.
  auto c = synthetic("T4");
  auto send =
      std::find_if(c.fits.begin(), c.fits.end(), [](const auto& f) { return f.op == "send"; });
  REQUIRE(send != c.fits.end());
  send->fit.alpha_ci95 = 7e6;
  send->fit.beta_ci95 = 6.6e6;
  const auto back = parse_calibration(to_json(c).dump(), "noisy.json");
  const OpFit* read = back.find("send");
  REQUIRE(read);
  REQUIRE(read->fit.beta_ci95);
  CHECK(*read->fit.beta_ci95 == 6.6e6);
  CHECK(*read->fit.alpha_ci95 == 7e6);
}

TEST_CASE("calibration: apply overrides matching GPUs and their PCIe links",
          "[backend][calibration]") {
  auto t = small_box();
  const auto report = apply_calibration(t, synthetic("T4"));
  CHECK(report.gpus.size() == 2);
  const auto& g0 = t.node(t.find("gpu0"));
  CHECK(g0.alpha == Approx(5e-6));
  CHECK(g0.launch_latency == Approx(3e-6));
  // The second stream of the "event" micro-plan costs 4.5 - 2 us.
  CHECK(g0.event_latency == Approx(2.5e-6));
  CHECK(g0.memory_bandwidth == Approx(300e9));
  for (const auto& link : t.links()) {
    // gpu -> cpu is a device-to-host path (12 GB/s), cpu -> gpu host-to-device (13 GB/s).
    if (t.node(link.from).kind == topo::NodeKind::gpu) CHECK(link.bandwidth == Approx(12e9));
    if (t.node(link.to).kind == topo::NodeKind::gpu) CHECK(link.bandwidth == Approx(13e9));
  }
  CHECK(t.node(t.find("cpu0")).memcpy_bandwidth == Approx(20e9));

  auto other = small_box();
  CHECK_THROWS_WITH(apply_calibration(other, synthetic("H100")),
                    Catch::Contains("\"H100\"") && Catch::Contains("T4"));
  CHECK(apply_calibration(other, synthetic("*")).gpus.size() == 2);
}

TEST_CASE("calibration: the loader reports every problem with its JSON path",
          "[backend][calibration]") {
  auto j = to_json(synthetic("T4"));
  j["colour"] = "blue";
  j["fits"]["warp"] = nlohmann::json::object();
  j["points"][0]["seconds"] = -1;
  j["fits"]["d2h"]["alpha_s"] = "fast";
  try {
    parse_calibration(j.dump(), "bad.json");
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("bad.json"));
    CHECK_THAT(what, Catch::Contains("/colour"));
    CHECK_THAT(what, Catch::Contains("/fits/warp"));
    CHECK_THAT(what, Catch::Contains("/points/0/seconds"));
    CHECK_THAT(what, Catch::Contains("/fits/d2h/alpha_s"));
  }
  CHECK_THROWS_AS(parse_calibration("{", "broken.json"), InputError);
  CHECK_THROWS_AS(parse_calibration("[]", "array.json"), InputError);
}

TEST_CASE("calibration: the host backend runs every micro-plan", "[backend][calibration]") {
  HostExecutor executor;
  CalibrationOptions o;
  o.sizes = {4096, 65536};
  o.delays = {1e-6, 2e-6};
  o.repetitions = 2;
  o.warmup = 0;
  const auto c = run_calibration(executor, o);
  // Points: empty 2 + event 2 + delay 2 x 2 + per size 10 kinds x 2 reps x 2 sizes = 48.
  CHECK(c.points.size() == 48);
  CHECK(c.fits.size() == 13);
  CHECK(c.backend == "host");
  CHECK(c.model == "*");
  for (const auto& p : c.points) CHECK(p.seconds >= 0);
  // What calibrate writes, the loader accepts.
  const auto back = parse_calibration(to_json(c).dump(), "host.json");
  CHECK(back.fits.size() == 13);
}

TEST_CASE("calibration: a pageable copy alone takes its own fit's time per byte",
          "[backend][calibration]") {
  // The host memcpy runs at 20 GB/s (the "host" fit), the PCIe links at 12 GB/s to the host and
  // 13 GB/s from it. The driver's staging measured 6 GB/s to a pageable buffer, slower than
  // both, and 25 GB/s from one, faster than the link (which then binds).
  auto c = synthetic("T4");
  add_line(c, "d2h_pageable", 20e-6, 1.0 / 6e9);
  add_line(c, "h2d_pageable", 2e-6, 1.0 / 25e9);
  fit_points(c);
  auto t = small_box();
  const auto report = apply_calibration(t, c);
  const auto& cpu = t.node(t.find("cpu0"));
  CHECK(cpu.pageable_traffic[0] == Approx(20.0 / 6.0));
  CHECK(cpu.pageable_traffic[1] == Approx(20.0 / 25.0));
  CHECK(std::count_if(report.changes.begin(), report.changes.end(), [](const std::string& s) {
          return s.find("cpu0: pageable_traffic.d2h = 3.333") != std::string::npos;
        }) == 1);  // one CPU, counted once for its two GPUs

  const topo::Router router(t);
  const Bytes bytes = Bytes{256} << 20;
  const auto one_copy = [&](sched::BufferId src, sched::BufferId dst) {
    sched::Plan plan;
    plan.rank_gpu = {t.find("gpu0")};
    plan.host_memory = sched::HostMemory::pageable;
    sched::Op op;
    op.kind = sched::OpKind::copy;
    op.rank = 0;
    op.src = {src, 0};
    op.dst = {dst, 0};
    op.bytes = bytes;
    plan.add(op);
    return sim::simulate(router, plan).time;
  };
  const double b = static_cast<double>(bytes);
  CHECK(one_copy(sched::BufferId::input, sched::BufferId::host) == Approx(b / 6e9).epsilon(1e-12));
  CHECK(one_copy(sched::BufferId::host, sched::BufferId::output) ==
        Approx(b / 13e9).epsilon(1e-12));
  // A topology without a memcpy bandwidth and no "host" fit cannot express the weight: the
  // pageable fits leave it as it was.
  auto no_host = c;
  no_host.fits.erase(std::remove_if(no_host.fits.begin(), no_host.fits.end(),
                                    [](const OpFit& f) { return f.op == "host"; }),
                     no_host.fits.end());
  auto unlimited = small_box();
  apply_calibration(unlimited, no_host);
  CHECK(unlimited.node(unlimited.find("cpu0")).pageable_traffic == std::array<double, 2>{1, 1});
}

TEST_CASE("calibration: a half-precision reduction slower than fp32 is charged more traffic",
          "[backend][calibration]") {
  auto c = synthetic("T4");
  add_line(c, "reduce_bf16", 3e-6, 3.0 / 200e9);  // two thirds of the fp32 payload rate
  fit_points(c);
  auto t = small_box();
  // The memory bandwidth comes from the fp32 fit, which charges 3 bytes per byte: a topology's
  // other fp32 traffic would no longer give the measured time.
  t.node(t.find("gpu0")).reduce_traffic[0] = 5.0;
  const auto report = apply_calibration(t, c);
  const auto& g0 = t.node(t.find("gpu0"));
  CHECK(g0.memory_bandwidth == Approx(300e9));
  CHECK(g0.reduce_traffic[0] == 3.0);
  CHECK(g0.reduce_traffic[1] == 3.0);  // no fp16 fit: as the topology had it
  CHECK(g0.reduce_traffic[2] == Approx(4.5));
  CHECK(std::count_if(report.changes.begin(), report.changes.end(), [](const std::string& s) {
          return s.find("reduce_traffic.bf16 = 4.500") != std::string::npos;
        }) == 2);

  // The ring allreduce on two ranks reduces one half of the buffer once per rank, at once on
  // separate GPUs: bf16 takes 1.5 times the fp32 reduction's drain, the rest is the same.
  const topo::Router router(t);
  sched::PlanRequest req;
  req.algorithm = sched::Algorithm::ring;
  req.size = Bytes{64} << 20;
  const double fp32 = sim::simulate(router, req).time;
  req.dtype = sched::DType::bf16;
  const double bf16 = sim::simulate(router, req).time;
  const double half = static_cast<double>(req.size) / 2;
  CHECK(bf16 - fp32 == Approx((4.5 - 3.0) * half / 300e9).epsilon(1e-9));
}
