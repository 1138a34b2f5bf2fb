#include "tools/bottlenecks.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "sim/resources.hpp"
#include "topology/units.hpp"

namespace collsim::cli {

namespace {

sim::ResourceId id_of(const sim::ResourceMap& map, const sim::ResourceUsage& r) {
  switch (r.kind) {
    case sim::ResourceKind::link:
      return map.link(r.index);
    case sim::ResourceKind::memory:
      return map.memory(r.index);
    case sim::ResourceKind::memcpy:
      return map.memcpy(r.index);
  }
  return map.link(r.index);
}

double share(double part, double whole) {
  return whole > 0 ? 100 * part / whole : 0;
}

}  // namespace

std::vector<std::string> bottleneck_lines(const topo::Topology& topology, const Usage& usage,
                                          std::size_t n) {
  std::vector<std::string> lines;
  const sim::ResourceMap map(topology);
  std::vector<const sim::ResourceUsage*> busiest;
  for (const auto& r : usage.resources) busiest.push_back(&r);
  std::sort(busiest.begin(), busiest.end(), [&](const auto* a, const auto* b) {
    if (a->utilisation != b->utilisation) return a->utilisation > b->utilisation;
    if (a->busy_time != b->busy_time) return a->busy_time > b->busy_time;
    return id_of(map, *a) < id_of(map, *b);
  });
  busiest.resize(std::min(n, busiest.size()));
  lines.push_back(fmt::format(
      "bottlenecks: the {} busiest of {} resources that carried a flow, over {}{}", busiest.size(),
      usage.resources.size(), format_duration(usage.time),
      usage.rotation == 0
          ? std::string()
          : fmt::format(" (one rank per orbit of a rotation by {} ranks: each figure holds for "
                        "every resource of its orbit)",
                        usage.rotation)));
  lines.emplace_back(
      "  utilisation = bytes / (bandwidth x time), or busy / time where unlimited; "
      "busy = time with a flow draining");
  lines.push_back(
      fmt::format("  {:>11}  {:>7}  {:>12}  {}", "utilisation", "busy", "carried", "resource"));
  for (const auto* r : busiest)
    lines.push_back(fmt::format("  {:>9.1f} %  {:>5.1f} %  {:>12}  {}", 100 * r->utilisation,
                                share(r->busy_time, usage.time), format_size_estimate(r->bytes),
                                map.name(topology, id_of(map, *r))));
  if (usage.copy_engines.empty()) return lines;

  std::vector<const sim::CopyEngineUsage*> waited;
  for (const auto& c : usage.copy_engines) waited.push_back(&c);
  std::sort(waited.begin(), waited.end(), [](const auto* a, const auto* b) {
    if (a->max_wait != b->max_wait) return a->max_wait > b->max_wait;
    if (a->busy_time != b->busy_time) return a->busy_time > b->busy_time;
    return a->gpu < b->gpu;
  });
  waited.resize(std::min(n, waited.size()));
  lines.push_back(
      fmt::format("copy engines: the {} of {} GPUs that ran copies whose copies waited "
                  "longest for an engine",
                  waited.size(), usage.copy_engines.size()));
  lines.emplace_back("  in use = engine time / run time: how many engines were busy on average");
  lines.push_back(
      fmt::format("  {:>9}  {:>7}  {:>12}  {}", "engines", "in use", "longest wait", "GPU"));
  for (const auto* c : waited)
    lines.push_back(
        fmt::format("  {:>9}  {:>7.2f}  {:>12}  {}",
                    c->engines == 0 ? std::string("unlimited") : std::to_string(c->engines),
                    usage.time > 0 ? c->busy_time / usage.time : 0, format_duration(c->max_wait),
                    topology.node(c->gpu).name));
  return lines;
}

}  // namespace collsim::cli
