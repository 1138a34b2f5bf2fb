#include "tools/sweep.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>

#include "schedules/generate.hpp"
#include "tools/progress.hpp"
#include "topology/error.hpp"
#include "topology/loader.hpp"

using namespace collsim;
using namespace collsim::cli;

namespace {

// gpu0 -- 100 GB/s NVLink -- gpu1, and gpu0 -- 10 GB/s PCIe -- cpu0.
topo::Topology two_gpus_and_a_cpu() {
  topo::Topology t;
  auto node = [&](const char* name, topo::NodeKind kind) {
    topo::Node n;
    n.name = name;
    n.kind = kind;
    return t.add_node(n);
  };
  const auto g0 = node("gpu0", topo::NodeKind::gpu);
  const auto g1 = node("gpu1", topo::NodeKind::gpu);
  const auto c0 = node("cpu0", topo::NodeKind::cpu);
  auto duplex = [&](topo::NodeId a, topo::NodeId b, topo::LinkKind kind, double bandwidth) {
    t.add_link(topo::Link{a, b, kind, bandwidth, 0.0, 0});
    t.add_link(topo::Link{b, a, kind, bandwidth, 0.0, 0});
  };
  duplex(g0, g1, topo::LinkKind::nvlink, 100e9);
  duplex(g0, c0, topo::LinkKind::pcie, 10e9);
  topo::finalize(t);
  return t;
}

// That machine, its router and a sweep context over both GPUs.
struct Setup {
  Setup() {
    context.router = &router;
    context.ranks = t.gpus();
  }
  const topo::Topology t = two_gpus_and_a_cpu();
  const topo::Router router{t};
  Context context;
};

// The first 64 GPUs of cluster-1024: a 64 MiB ring there passes 2^16 events, so the engine
// reports progress while it runs.
struct ClusterSetup {
  ClusterSetup() {
    context.router = &router;
    context.ranks.assign(t.gpus().begin(), t.gpus().begin() + 64);
  }
  const topo::Topology t =
      topo::load_topology(std::string(COLLSIM_SOURCE_DIR) + "/configs/cluster-1024.json");
  const topo::Router router{t};
  Context context;
};

}  // namespace

TEST_CASE("auto searches k = 1 2 4 ... 64 within the element count", "[cli][sweep]") {
  CHECK(auto_chunk_counts(1) == std::vector<std::uint32_t>{1});
  CHECK(auto_chunk_counts(5) == std::vector<std::uint32_t>{1, 2, 4});
  CHECK(auto_chunk_counts(1000) == std::vector<std::uint32_t>{1, 2, 4, 8, 16, 32, 64});
}

TEST_CASE("model terms: copy bytes over the copy path and sent bytes over the route",
          "[cli][sweep]") {
  const topo::Topology t = two_gpus_and_a_cpu();
  const topo::Router router(t);
  sched::Plan plan;
  plan.size = 1'000'000'000;
  plan.rank_gpu = {t.gpus()[0], t.gpus()[1]};
  sched::Op copy;
  copy.kind = sched::OpKind::copy;
  copy.rank = 0;
  copy.bytes = 1'000'000'000;
  copy.src = {sched::BufferId::input, 0};
  copy.dst = {sched::BufferId::host, 0};
  plan.add(copy);
  sched::Op send;
  send.kind = sched::OpKind::send;
  send.rank = 0;
  send.peer = 1;
  send.bytes = 1'000'000'000;
  const auto s = plan.add(send);
  sched::Op recv;
  recv.kind = sched::OpKind::recv;
  recv.rank = 1;
  recv.peer = 0;
  recv.bytes = 1'000'000'000;
  recv.dst = {sched::BufferId::output, 0};
  plan.match(s, plan.add(recv));

  const ModelTerms terms = model_terms(router, plan);
  // d2h over the 10 GB/s PCIe link: 1 GB / 10 GB/s = 0.1 s.
  CHECK(terms.copy == Approx(0.1));
  // The send over the 100 GB/s NVLink: 1 GB / 100 GB/s = 0.01 s. Copy dominated.
  CHECK(terms.link == Approx(0.01));

  // A pageable host buffer: the d2h copy also crosses cpu0's memcpy, here 4 GB/s: 0.25 s.
  topo::Topology slow_memcpy = two_gpus_and_a_cpu();
  slow_memcpy.node(slow_memcpy.find("cpu0")).memcpy_bandwidth = 4e9;
  const topo::Router slow_router(slow_memcpy);
  CHECK(model_terms(slow_router, plan).copy == Approx(0.1));
  plan.host_memory = sched::HostMemory::pageable;
  CHECK(model_terms(slow_router, plan).copy == Approx(0.25));
  CHECK(model_terms(router, plan).copy == Approx(0.1));  // an unlimited memcpy changes nothing
  // Staging charged 1.25 bytes of memcpy per byte to the host: 1 GB at 4 / 1.25 GB/s.
  slow_memcpy.node(slow_memcpy.find("cpu0")).pageable_traffic = {1.25, 1};
  const topo::Router weighted(slow_memcpy);
  CHECK(model_terms(weighted, plan).copy == Approx(0.3125));
}

TEST_CASE("model terms summed batch by batch, as a streamed plan drops its ops, are the same",
          "[cli][sweep]") {
  const topo::Topology t =
      topo::load_topology(std::string(COLLSIM_SOURCE_DIR) + "/configs/t4x4-pcie.json");
  const topo::Router router(t);
  sched::PlanRequest req;
  req.algorithm = sched::Algorithm::ring;
  req.size = 64 << 20;
  req.chunks = 4;
  const ModelTerms whole = model_terms(router, sched::generate(router, req));
  REQUIRE(whole.copy > 0);  // the T4 box stages through host memory
  sched::Plan plan;
  ModelTermsSum sum(router);
  std::size_t batches = 0;
  sched::generate(router, req, plan, [&] {
    sum.add(plan);
    ++batches;
    plan.drop_before(static_cast<sched::OpId>(plan.num_ops()));  // forget everything seen
  });
  CHECK(batches > 2);
  CHECK(sum.terms().copy == whole.copy);
  CHECK(sum.terms().link == whole.link);
}

TEST_CASE("requests check the size against the dtype and k against the element count",
          "[cli][sweep]") {
  const Setup setup;
  const Context& context = setup.context;
  Point point;
  point.size = 6;  // 1.5 fp32 elements
  CHECK_THROWS_WITH(make_request(context, point, sched::Algorithm::ring, 1),
                    Catch::Contains("whole number of fp32 elements"));
  point.size = 8;  // 2 fp32 elements
  CHECK_THROWS_WITH(make_request(context, point, sched::Algorithm::ring, 3),
                    Catch::Contains("larger than the element count 2"));
  point.nranks = 3;
  CHECK_THROWS_WITH(make_request(context, point, sched::Algorithm::ring, 1),
                    Catch::Contains("only 2 GPUs"));
  point.nranks = 1;
  const auto request = make_request(context, point, sched::Algorithm::ring, 2);
  CHECK(request.ranks == std::vector<topo::NodeId>{setup.t.gpus()[0]});
  CHECK(request.chunks == 2);
}

TEST_CASE("a failing point is a row with an error and not an exception", "[cli][sweep]") {
  const Setup setup;
  const Context& context = setup.context;
  Point point;
  point.size = 8;
  point.chunks = 3;
  const Evaluation ev = evaluate(context, point, "test");
  CHECK_FALSE(ev.row.ok());
  CHECK_FALSE(ev.internal_error);
  CHECK_THAT(ev.row.error, Catch::Contains("element count"));
  CHECK(ev.row.topology == "test");
  CHECK(ev.row.size == 8);
}

TEST_CASE("a point pool evaluates each point added once, and says when it is done",
          "[cli][sweep]") {
  const Setup setup;
  const Context& context = setup.context;
  std::vector<Point> points;
  for (Bytes size : {Bytes{1024}, Bytes{8}, Bytes{65536}, Bytes{4096}, Bytes{1 << 20}}) {
    Point p;
    p.size = size;
    p.chunks = 4;  // fails for 8 B (two elements): a failed point comes back like any other
    points.push_back(p);
  }
  PointPool pool(context, points, "test", 2);
  // Out of input order, and one point twice: the pool runs what it is given.
  const std::vector<std::size_t> added{3, 0, 4, 1, 2, 0};
  for (std::size_t i : added) pool.add(i);
  CHECK(pool.unfinished() == added.size());
  pool.close();
  CHECK_THROWS_AS(pool.add(1), InternalError);
  std::vector<int> seen(points.size(), 0);
  while (pool.unfinished() > 0)
    for (const auto& [i, ev] : pool.finished(std::chrono::milliseconds(200))) {
      REQUIRE(i < points.size());
      ++seen[i];
      const Evaluation alone = evaluate(context, points[i], "test");
      CHECK(ev.row.ok() == alone.row.ok());
      CHECK(ev.row.time == alone.row.time);
      CHECK(ev.row.events == alone.row.events);
    }
  CHECK(seen == std::vector<int>{2, 1, 1, 1, 1});
  CHECK(pool.finished(std::chrono::milliseconds(1)).empty());
}

TEST_CASE("a point pool follows the share done of its running points", "[cli][sweep]") {
  ClusterSetup setup;
  Context& context = setup.context;
  std::vector<Point> points(2);
  points[0].size = points[1].size = 64 << 20;
  points[0].chunks = 8;
  points[1].chunks = kAutoChunks;  // an auto search: its shares start again with each k
  const PointPool* watched = nullptr;
  std::vector<std::pair<double, double>> seen;  // (share reported, pool's running share then)
  context.progress = [&](const SimulationProgress& p) {
    if (p.fraction >= 0 && watched != nullptr) seen.emplace_back(p.fraction, watched->running());
  };
  for (const std::size_t i : {std::size_t{0}, std::size_t{1}}) {
    INFO("point " << i);
    seen.clear();
    PointPool pool(context, points, "cluster", 1, true);
    watched = &pool;
    pool.add(i);
    pool.close();
    while (pool.unfinished() > 0) pool.finished(std::chrono::milliseconds(200));
    watched = nullptr;
    REQUIRE(seen.size() >= 3);  // the reports reach the caller's progress through the pool
    CHECK(std::any_of(seen.begin(), seen.end(), [](const auto& s) { return s.first > 0; }));
    for (const auto& [share, running] : seen) CHECK(running == (i == 0 ? share : 0.0));
    CHECK(pool.running() == 0);  // a finished point no longer counts
  }
}

TEST_CASE("the progress bar counts the running points' shares in its bar and time left",
          "[cli][sweep]") {
  const auto drawn = [](std::size_t done, std::size_t total, double running) {
    std::FILE* out = std::tmpfile();
    REQUIRE(out != nullptr);
    Progress progress(out, true);
    progress.update(done, total, running);
    std::rewind(out);
    std::string text(200, '\0');
    text.resize(std::fread(text.data(), 1, text.size(), out));
    std::fclose(out);
    return text;
  };
  // Nothing done and nothing running: no estimate yet.
  CHECK_THAT(drawn(0, 4, 0), Catch::Contains("[........................] 0/4 points, ") &&
                                 Catch::Contains("? left"));
  // A quarter of the work done by the running points alone: a quarter of the bar, an estimate.
  const std::string quarter = drawn(0, 4, 1.0);
  CHECK_THAT(quarter, Catch::Contains("[######..................] 0/4 points +1.00, "));
  CHECK_THAT(quarter, !Catch::Contains("? left"));
  CHECK_THAT(drawn(2, 4, 0.5), Catch::Contains("[###############.........] 2/4 points +0.50, "));
  CHECK_THAT(drawn(4, 4, 0), Catch::Contains("[########################] 4/4 points, "));
}

TEST_CASE("a point's estimated cost grows with k and with an auto search", "[cli][sweep][mpi]") {
  const Setup setup;
  const Context& context = setup.context;
  std::vector<Point> points;
  for (std::uint32_t k : {1u, 2u}) {
    Point p;
    p.size = 4096;
    p.chunks = k;
    points.push_back(p);
  }
  points.push_back(
      Point{sched::Collective::allreduce, std::nullopt, 4096, sched::DType::fp32, kAutoChunks, 0});
  const std::vector<double> cost = estimated_costs(context, points);
  REQUIRE(cost.size() == 3);
  CHECK(cost[0] >= 1);
  CHECK(cost[1] > cost[0]);
  CHECK(cost[2] > cost[0] + cost[1]);  // every algorithm at every k, these two among them
}

TEST_CASE("points are handed out heaviest first, each once", "[cli][sweep][mpi]") {
  // Equal costs keep input order.
  Dispenser d({1, 2, 1, 2}, 2);
  CHECK(d.left() == 4);
  CHECK(d.take(1) == std::vector<std::size_t>{1});
  CHECK(d.take(2) == std::vector<std::size_t>{3, 0});
  CHECK(d.left() == 1);
  CHECK(d.take(5) == std::vector<std::size_t>{2});
  CHECK(d.take(1).empty());
  CHECK(d.left() == 0);
  Dispenser none({}, 4);
  CHECK(none.take(3).empty());
  // A sweep on several threads of one process starts them in the same order, all at once.
  CHECK(start_order({1, 3, 2, 3}) == std::vector<std::size_t>{1, 3, 2, 0});
  CHECK(start_order({1, 1, 1}) == std::vector<std::size_t>{0, 1, 2});
  CHECK(start_order({}).empty());
}

TEST_CASE("light points travel in batches that shrink as the sweep ends", "[cli][sweep][mpi]") {
  // 1000 equal points for 2 workers: the first batch is a quarter of them (half a worker's
  // share), and each batch is a quarter of what is left, down to one point at a time.
  const std::size_t n = 1000;
  Dispenser d(std::vector<double>(n, 1.0), 2);
  std::vector<std::size_t> sizes;
  std::vector<int> seen(n, 0);
  while (d.left() > 0) {
    const std::vector<std::size_t> batch = d.take(1);
    REQUIRE(!batch.empty());
    sizes.push_back(batch.size());
    for (std::size_t i : batch) ++seen[i];
  }
  CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
  CHECK(sizes.front() == 250);
  CHECK(sizes[1] == 187);  // a quarter of the 750 left, rounded down
  CHECK(std::is_sorted(sizes.rbegin(), sizes.rend()));
  CHECK(sizes.back() == 1);
  CHECK(sizes.size() == 25);  // batches, not one message per point (docs/cli.md says so)
  // A heavy point is never held back for a batch of light ones: it goes alone.
  Dispenser heavy({100, 1, 1, 1}, 2);
  CHECK(heavy.take(1) == std::vector<std::size_t>{0});
}

TEST_CASE("a simulation's progress says what share of its ops is done", "[cli][sweep]") {
  ClusterSetup setup;
  Context& context = setup.context;
  std::vector<std::pair<std::string, SimulationProgress>> seen;
  context.progress = [&](const SimulationProgress& p) { seen.emplace_back(p.what, p); };
  for (sched::Algorithm algo : {sched::Algorithm::ring, sched::Algorithm::tree}) {
    seen.clear();
    Point point;
    point.algo = algo;
    point.size = 64 << 20;
    point.chunks = algo == sched::Algorithm::ring ? 8 : 256;
    const Evaluation ev = evaluate_or_throw(context, point, "cluster");
    INFO(ev.row.algo);
    // A whole plan says what it does before its first event; a streamed one starts at once.
    std::string registering;
    if (algo == sched::Algorithm::tree) {
      REQUIRE(seen.size() >= 2);
      CHECK(seen[0].second.stage == "generating the plan");
      registering = seen[1].second.stage;
      seen.erase(seen.begin(), seen.begin() + 2);
    }
    // Then the engine's reports: the first as the run starts, before any event.
    REQUIRE(seen.size() >= 2);
    CHECK(seen.front().second.at.events == 0);
    CHECK(seen.front().second.fraction == 0);
    for (std::size_t i = 0; i < seen.size(); ++i) {
      const SimulationProgress& p = seen[i].second;
      CHECK_THAT(seen[i].first, Catch::Contains(ev.row.algo + " allreduce k="));
      CHECK(p.stage.empty());
      CHECK(p.at.ops_done <= (p.at.ops_total > 0 ? p.at.ops_total : p.at.ops_done));
      CHECK(p.fraction >= 0);
      CHECK(p.fraction < 1);
      if (i > 0) CHECK(p.fraction > 0);
      if (i > 0) CHECK(p.fraction >= seen[i - 1].second.fraction);
    }
    if (algo == sched::Algorithm::tree) {
      CHECK(registering == fmt::format("registering its {} ops (checks, stream order, routes)",
                                       seen.back().second.at.ops_total));
      // A whole plan: the share is exact from the first report on.
      for (const auto& [what, p] : seen)
        CHECK(p.fraction ==
              static_cast<double>(p.at.ops_done) / static_cast<double>(p.at.ops_total));
    } else {
      // Streamed: against the estimate while generated (at most 0.99), exact once it is whole.
      CHECK(seen.front().second.at.ops_total == 0);
      for (const auto& [what, p] : seen)
        if (p.at.ops_total == 0) CHECK(p.fraction <= 0.99);
    }
  }
}
