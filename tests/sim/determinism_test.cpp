// Same inputs, same outputs, bit for bit.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "sim/engine.hpp"
#include "tests/sim/sim_fixtures.hpp"
#include "topology/routing.hpp"

using namespace collsim;
using namespace collsim::sim::testing;

namespace {

// A ring of n GPUs with uneven link bandwidths, several streams per rank, transfers that share
// links, and reductions: enough interleaving for any order dependence to show.
sched::Plan busy_plan(std::uint32_t n) {
  sched::Plan plan;
  for (std::uint32_t r = 0; r < n; ++r) plan.rank_gpu.push_back(r);
  std::vector<sched::OpId> last(n, sched::kNoOp);
  for (int step = 0; step < 6; ++step) {
    for (std::uint32_t r = 0; r < n; ++r) {
      const std::uint32_t to = (r + 1 + static_cast<std::uint32_t>(step % 2)) % n;
      const auto stream = static_cast<sched::StreamId>(step % 3);
      const Bytes bytes = 1'000'000u * (1 + (r * 7 + static_cast<unsigned>(step)) % 5);
      const auto s = plan.add(send_op(r, to, bytes, stream));
      const auto v = plan.add(recv_op(to, r, bytes, stream));
      plan.match(s, v);
      last[to] = plan.add(reduce_op(to, bytes, stream), {v});
    }
  }
  return plan;
}

}  // namespace

TEST_CASE("two runs of the same inputs are identical", "[sim][determinism]") {
  const std::uint32_t n = 9;
  topo::Topology t;
  for (std::uint32_t i = 0; i < n; ++i) {
    add_gpu(t, fmt::format("gpu{}", i));
    t.node(i).memory_bandwidth = 1e12 + 1e11 * i;
  }
  for (std::uint32_t i = 0; i < n; ++i)
    add_duplex(t, i, (i + 1) % n, 1e9 * (1 + i % 3), 1e-6 * (1 + i % 2));
  topo::finalize(t);
  const auto plan = busy_plan(n);
  sim::Options o;
  o.record_ops = true;
  o.background.push_back(sim::BackgroundFlow{0, 4, 3'000'000, 0.001});
  o.capacity.push_back(sim::CapacityTrace{2, {{0.002, 5e8}, {0.004, 2e9}}});
  topo::Router r1(t);
  topo::Router r2(t);
  const auto a = sim::simulate(r1, plan, o);
  const auto b = sim::simulate(r2, plan, o);
  REQUIRE(a.time > 0);
  CHECK(std::memcmp(&a.time, &b.time, sizeof(double)) == 0);
  CHECK(a.events == b.events);
  CHECK(a.link_bytes == b.link_bytes);
  REQUIRE(a.ops.size() == b.ops.size());
  bool same = true;
  for (std::size_t i = 0; i < a.ops.size(); ++i)
    same = same && std::memcmp(&a.ops[i], &b.ops[i], sizeof(sim::OpTiming)) == 0;
  CHECK(same);
}

TEST_CASE("the build rounds a * b + c twice, as written, on every target", "[sim][determinism]") {
  // A fused multiply-add rounds once: (1 + 2^-30)(1 - 2^-30) - 1 is then -2^-60, not 0. Builds
  // that fused (aarch64, or x86-64 with -march=native) would give other simulated times in the
  // last digits; CMakeLists.txt turns fusing off for all project code.
  volatile double a = 1 + std::ldexp(1.0, -30);
  volatile double b = 1 - std::ldexp(1.0, -30);
  volatile double c = -1;
  const double x = a, y = b, z = c;
  CHECK(x * y + z == 0.0);
}
