#include "cuda_backend/calibration.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "topology/error.hpp"
#include "topology/json_reader.hpp"

namespace collsim::backend {

using nlohmann::json;

const std::vector<OpKindInfo>& op_kinds() {
  static const std::vector<OpKindInfo> kKinds = {
      {"empty", "none", 0, "no data"},
      {"event", "none", 0, "no data"},
      {"delay", "seconds", 0, "no data; x is the requested delay"},
      {"d2d", "bytes", 2,
       "device memory traffic: a device-to-device copy reads and writes each byte"},
      {"d2h", "bytes", 1, "bus traffic: each byte crosses the host link once"},
      {"h2d", "bytes", 1, "bus traffic: each byte crosses the host link once"},
      {"host", "bytes", 2, "host memory traffic: memcpy reads and writes each byte"},
      {"d2h_pageable", "bytes", 1,
       "bus traffic to pageable host memory, staged by the driver through a pinned buffer"},
      {"h2d_pageable", "bytes", 1,
       "bus traffic from pageable host memory, staged by the driver through a pinned buffer"},
      {"send", "bytes", 1, "payload delivered from one rank to another"},
      {"reduce_fp32", "bytes", 3, "device memory traffic: two operands read, one result written"},
      {"reduce_fp16", "bytes", 3, "device memory traffic: two operands read, one result written"},
      {"reduce_bf16", "bytes", 3, "device memory traffic: two operands read, one result written"},
  };
  return kKinds;
}

const OpKindInfo* find_op_kind(std::string_view name) {
  for (const auto& k : op_kinds())
    if (k.name == name) return &k;
  return nullptr;
}

const OpFit* Calibration::find(std::string_view op) const {
  for (const auto& f : fits)
    if (f.op == op) return &f;
  return nullptr;
}

void fit_points(Calibration& calibration) {
  calibration.fits.clear();
  for (const auto& kind : op_kinds()) {
    std::vector<double> x, y;
    for (const auto& p : calibration.points)
      if (p.op == kind.name) {
        x.push_back(p.x);
        y.push_back(p.seconds);
      }
    if (x.empty()) continue;
    OpFit f;
    f.op = std::string(kind.name);
    f.fit = fit_line(x, y);
    if (kind.x_unit == "bytes" && f.fit.beta > 0) {
      f.payload_bandwidth = std::min(1.0 / f.fit.beta, kMaxBandwidth);
      f.traffic_bandwidth = std::min(kind.traffic_per_byte / f.fit.beta, kMaxBandwidth);
    }
    calibration.fits.push_back(std::move(f));
  }
}

json to_json(const Calibration& c) {
  json fits = json::object();
  for (const auto& f : c.fits) {
    const auto* kind = find_op_kind(f.op);
    json j = {{"x_unit", kind ? kind->x_unit : "bytes"},
              {"alpha_s", f.fit.alpha},
              {"beta_s_per_unit", f.fit.beta},
              {"points", f.fit.points},
              {"residual_rms_s", f.fit.residual_rms},
              {"max_relative_residual", f.fit.max_relative_residual}};
    if (f.fit.alpha_ci95) j["alpha_ci95_s"] = *f.fit.alpha_ci95;
    if (f.fit.beta_ci95) j["beta_ci95_s_per_unit"] = *f.fit.beta_ci95;
    if (f.payload_bandwidth > 0) {
      j["payload_bandwidth_Bps"] = f.payload_bandwidth;
      j["traffic_bandwidth_Bps"] = f.traffic_bandwidth;
      j["traffic_per_byte"] = kind ? kind->traffic_per_byte : 1.0;
      j["bandwidth_definition"] = kind ? kind->definition : "";
      // Copies to or from the host move bus and host-memory bytes, not device-memory ones.
      const bool on_device = kind && !kind->name.starts_with("d2h") &&
                             !kind->name.starts_with("h2d") && kind->name != "host";
      if (c.device_memory_bandwidth > 0 && on_device)
        j["fraction_of_device_memory_bandwidth"] = f.traffic_bandwidth / c.device_memory_bandwidth;
    }
    fits[f.op] = std::move(j);
  }
  json points = json::array();
  for (const auto& p : c.points) {
    json j = {{"op", p.op}, {"x", p.x}, {"seconds", p.seconds}};
    if (const OpFit* f = c.find(p.op))
      j["residual_s"] = p.seconds - (f->fit.alpha + f->fit.beta * p.x);
    points.push_back(std::move(j));
  }
  return json{{"format", "collsim-calibration"},
              {"version", 1},
              {"backend", c.backend},
              {"device", c.device},
              {"model", c.model},
              {"driver_version", c.driver_version},
              {"runtime_version", c.runtime_version},
              {"date", c.date},
              {"devices", c.devices},
              {"device_memory_bandwidth_Bps", c.device_memory_bandwidth},
              {"repetitions", c.repetitions},
              {"warmup", c.warmup},
              {"fits", std::move(fits)},
              {"points", std::move(points)}};
}

void save_calibration(const Calibration& calibration, const std::string& path) {
  std::ofstream out(path);
  if (!out)
    throw InputError(path, "--out",
                     "cannot open the file for writing; check the directory exists "
                     "and is writable");
  out << to_json(calibration).dump(2) << '\n';
  if (!out) throw InputError(path, "--out", "writing the calibration failed (disk full?)");
}

namespace {
// The range a topology file accepts for reduce_traffic and pageable_traffic (ratios,
// docs/topology-format.md).
constexpr double kMinTraffic = 1e-6, kMaxTraffic = 1e6;
constexpr topo::json_io::Expected kCalibrationDocument = {
    "calibration",
    R"({"format": "collsim-calibration", "version": 1, "fits": {...}} (docs/calibration-format.md))",
    "the output of `collsim calibrate --out FILE`"};
}  // namespace

Calibration load_calibration(const std::string& path) {
  return parse_calibration(topo::json_io::read_text_file(path, kCalibrationDocument), path);
}

namespace {

// Reads typed fields and records what is wrong instead of stopping at the first problem.
class Reader {
 public:
  explicit Reader(DiagnosticSink& sink) : sink_(sink) {}

  std::string string(const json& obj, const std::string& key, const std::string& where,
                     bool required = true) {
    const auto it = obj.find(key);
    if (it == obj.end()) {
      if (required)
        sink_.error(topo::json_io::pointer(where, key),
                    fmt::format("missing \"{}\"; expected a string", key));
      return {};
    }
    if (!it->is_string()) {
      sink_.error(topo::json_io::pointer(where, key),
                  fmt::format("found {}; expected a string", it->type_name()));
      return {};
    }
    return it->get<std::string>();
  }

  double number(const json& obj, const std::string& key, const std::string& where, double lo,
                double hi, bool required = true, double fallback = 0) {
    const auto it = obj.find(key);
    if (it == obj.end()) {
      if (required)
        sink_.error(topo::json_io::pointer(where, key),
                    fmt::format("missing \"{}\"; expected a number in [{}, {}]", key, lo, hi));
      return fallback;
    }
    if (!it->is_number()) {
      sink_.error(topo::json_io::pointer(where, key),
                  fmt::format("found {}; expected a number in [{}, {}]", it->type_name(), lo, hi));
      return fallback;
    }
    const double v = it->get<double>();
    if (!std::isfinite(v) || v < lo || v > hi) {
      sink_.error(topo::json_io::pointer(where, key),
                  fmt::format("found {}; expected a number in [{}, {}]", v, lo, hi));
      return fallback;
    }
    return v;
  }

  void unknown_keys(const json& obj, const std::string& where,
                    std::initializer_list<std::string_view> known) {
    for (const auto& [key, value] : obj.items()) {
      if (std::find(known.begin(), known.end(), key) == known.end())
        sink_.error(
            topo::json_io::pointer(where, key),
            fmt::format("unknown key \"{}\"; expected one of: {}", key, fmt::join(known, ", ")));
    }
  }

 private:
  DiagnosticSink& sink_;
};

}  // namespace

Calibration parse_calibration(std::string_view text, const std::string& file) {
  // The topology loader's reader: syntax errors with line and column, duplicate keys with their
  // JSON pointer, nesting and binary text; nlohmann alone keeps the last of duplicate keys.
  DiagnosticSink sink(file);
  const auto parsed = topo::json_io::parse_document(text, sink, kCalibrationDocument);
  sink.throw_if_any();
  const json& doc = *parsed;
  if (!doc.is_object()) {
    sink.error("", fmt::format("found {}; expected a JSON object written by `collsim calibrate`",
                               doc.type_name()));
    sink.throw_if_any();
  }
  Reader read(sink);
  read.unknown_keys(doc, "",
                    {"format", "version", "backend", "device", "model", "driver_version",
                     "runtime_version", "date", "devices", "device_memory_bandwidth_Bps",
                     "repetitions", "warmup", "fits", "points"});
  Calibration c;
  if (read.string(doc, "format", "") != "collsim-calibration" && doc.contains("format"))
    sink.error("/format", "expected \"collsim-calibration\"; is this a calibration file?");
  const double version = read.number(doc, "version", "", 1, 1);
  (void)version;
  c.backend = read.string(doc, "backend", "");
  c.device = read.string(doc, "device", "");
  c.model = read.string(doc, "model", "");
  if (doc.contains("model") && c.model.empty())
    sink.error("/model", "empty model; expected the GPU model to match, or \"*\" for every GPU");
  c.driver_version = read.string(doc, "driver_version", "", false);
  c.runtime_version = read.string(doc, "runtime_version", "", false);
  c.date = read.string(doc, "date", "");
  c.devices = static_cast<int>(read.number(doc, "devices", "", 1, 1e6, false, 1));
  c.device_memory_bandwidth =
      read.number(doc, "device_memory_bandwidth_Bps", "", 0, kMaxBandwidth, false, 0);
  c.repetitions = static_cast<std::uint32_t>(read.number(doc, "repetitions", "", 0, 1e9, false, 0));
  c.warmup = static_cast<std::uint32_t>(read.number(doc, "warmup", "", 0, 1e9, false, 0));

  if (const auto it = doc.find("fits"); it == doc.end() || !it->is_object()) {
    sink.error("/fits",
               "missing or not an object; expected {\"d2d\": {\"alpha_s\": ..., "
               "\"beta_s_per_unit\": ...}, ...}");
  } else {
    for (const auto& [name, f] : it->items()) {
      const std::string where = "/fits/" + name;
      const auto* kind = find_op_kind(name);
      if (!kind) {
        std::vector<std::string_view> names;
        for (const auto& k : op_kinds()) names.push_back(k.name);
        sink.error(where, fmt::format("unknown op kind \"{}\"; expected one of: {}", name,
                                      fmt::join(names, ", ")));
        continue;
      }
      if (!f.is_object()) {
        sink.error(where, fmt::format("found {}; expected an object", f.type_name()));
        continue;
      }
      read.unknown_keys(
          f, where,
          {"x_unit", "alpha_s", "alpha_ci95_s", "beta_s_per_unit", "beta_ci95_s_per_unit", "points",
           "residual_rms_s", "max_relative_residual", "payload_bandwidth_Bps",
           "traffic_bandwidth_Bps", "traffic_per_byte", "bandwidth_definition",
           "fraction_of_device_memory_bandwidth"});
      OpFit fit;
      fit.op = name;
      fit.fit.alpha = read.number(f, "alpha_s", where, -kMaxDuration, kMaxDuration);
      fit.fit.beta = read.number(f, "beta_s_per_unit", where, -kMaxDuration, kMaxDuration);
      // A confidence interval only reports how noisy the points were; a noisy sweep (a loaded
      // host) legitimately gives a wide one, so any finite width is accepted.
      constexpr double kAnyWidth = std::numeric_limits<double>::max();
      if (f.contains("alpha_ci95_s"))
        fit.fit.alpha_ci95 = read.number(f, "alpha_ci95_s", where, 0, kAnyWidth);
      if (f.contains("beta_ci95_s_per_unit"))
        fit.fit.beta_ci95 = read.number(f, "beta_ci95_s_per_unit", where, 0, kAnyWidth);
      fit.fit.points = static_cast<std::size_t>(read.number(f, "points", where, 0, 1e12, false));
      fit.fit.residual_rms = read.number(f, "residual_rms_s", where, 0, kMaxDuration, false);
      if (kind->x_unit == "bytes" && fit.fit.beta > 0) {
        fit.payload_bandwidth = std::min(1.0 / fit.fit.beta, kMaxBandwidth);
        fit.traffic_bandwidth = std::min(kind->traffic_per_byte / fit.fit.beta, kMaxBandwidth);
      }
      c.fits.push_back(std::move(fit));
    }
  }
  if (const auto it = doc.find("points"); it != doc.end()) {
    if (!it->is_array()) {
      sink.error("/points", fmt::format("found {}; expected an array", it->type_name()));
    } else {
      for (std::size_t i = 0; i < it->size(); ++i) {
        const auto& p = (*it)[i];
        const std::string where = fmt::format("/points/{}", i);
        if (!p.is_object()) {
          sink.error(where, "expected an object {\"op\", \"x\", \"seconds\"}");
          continue;
        }
        CalibrationPoint point;
        point.op = read.string(p, "op", where);
        if (!point.op.empty() && !find_op_kind(point.op))
          sink.error(where + "/op", fmt::format("unknown op kind \"{}\"", point.op));
        point.x = read.number(p, "x", where, 0, 1e18);
        point.seconds = read.number(p, "seconds", where, 0, kMaxDuration);
        c.points.push_back(std::move(point));
      }
    }
  }
  sink.throw_if_any();
  return c;
}

namespace {

// The bytes of traffic per byte that make an op alone take its fit's time per byte on a resource
// of `bandwidth`: beta x bandwidth. Left as it was where the fit or the bandwidth cannot say.
void set_traffic(double& traffic, const OpFit* fit, double bandwidth, const std::string& what,
                 ApplyReport& report) {
  if (!fit || !(fit->fit.beta > 0) || !(bandwidth < kUnlimited)) return;
  traffic = std::clamp(fit->fit.beta * bandwidth, kMinTraffic, kMaxTraffic);
  report.changes.push_back(fmt::format("{} = {:.3f}", what, traffic));
}

}  // namespace

ApplyReport apply_calibration(topo::Topology& topology, const Calibration& c,
                              const std::string& file) {
  ApplyReport report;
  std::set<std::string> models;
  for (topo::NodeId id = 0; id < topology.num_nodes(); ++id) {
    const auto& node = topology.node(id);
    if (node.kind != topo::NodeKind::gpu) continue;
    models.insert(node.model.empty() ? "(none)" : node.model);
    if (c.model == "*" || node.model == c.model) report.gpus.push_back(id);
  }
  if (report.gpus.empty())
    throw InputError(file, "/model",
                     fmt::format("calibration is for GPU model \"{}\" but the topology's GPUs are "
                                 "{}; set \"model\" in the topology's GPUs or in the calibration "
                                 "file (\"*\" applies it to every GPU)",
                                 c.model, fmt::join(models, ", ")));

  const OpFit* send = c.find("send");
  const OpFit* reduce = c.find("reduce_fp32");
  const OpFit* reduce_fp16 = c.find("reduce_fp16");
  const OpFit* reduce_bf16 = c.find("reduce_bf16");
  const OpFit* d2h = c.find("d2h");
  const OpFit* h2d = c.find("h2d");
  const OpFit* host = c.find("host");
  const OpFit* d2h_pageable = c.find("d2h_pageable");
  const OpFit* h2d_pageable = c.find("h2d_pageable");
  const OpFit* event = c.find("event");
  const OpFit* empty = c.find("empty");
  std::set<topo::NodeId> cpus_done;
  for (topo::NodeId gpu : report.gpus) {
    auto& node = topology.node(gpu);
    if (send) {
      node.alpha = std::max(0.0, send->fit.alpha);
      report.changes.push_back(
          fmt::format("{}: alpha = {}", node.name, format_duration(node.alpha)));
    }
    if (reduce) {
      node.launch_latency = std::max(0.0, reduce->fit.alpha);
      report.changes.push_back(
          fmt::format("{}: launch_latency = {}", node.name, format_duration(node.launch_latency)));
      if (reduce->fit.beta > 0) {
        node.memory_bandwidth = std::min(3.0 / reduce->fit.beta, kMaxBandwidth);
        node.reduce_traffic[0] = 3.0;  // the fp32 reduction is what measured the bandwidth
        report.changes.push_back(fmt::format("{}: memory_bandwidth = {}", node.name,
                                             format_bandwidth(node.memory_bandwidth)));
      }
    }
    // A half-precision reduction slower than the fp32 one per byte is charged more memory
    // traffic per byte, so that alone it takes its own measured time.
    set_traffic(node.reduce_traffic[1], reduce_fp16, node.memory_bandwidth,
                node.name + ": reduce_traffic.fp16", report);
    set_traffic(node.reduce_traffic[2], reduce_bf16, node.memory_bandwidth,
                node.name + ": reduce_traffic.bf16", report);
    if (event && empty) {
      // The "event" micro-plan is the "empty" one plus a second stream that waits for it.
      node.event_latency = std::max(0.0, event->fit.alpha - empty->fit.alpha);
      report.changes.push_back(
          fmt::format("{}: event_latency = {}", node.name, format_duration(node.event_latency)));
    }
    for (topo::LinkId l = 0; l < topology.num_links(); ++l) {
      auto& link = topology.link(l);
      if (link.kind != topo::LinkKind::pcie) continue;
      const OpFit* f = link.from == gpu ? d2h : link.to == gpu ? h2d : nullptr;
      if (!f || f->fit.beta <= 0) continue;
      link.bandwidth = std::min(1.0 / f->fit.beta, kMaxBandwidth);
      report.changes.push_back(
          fmt::format("{} -> {}: bandwidth = {}", topology.node(link.from).name,
                      topology.node(link.to).name, format_bandwidth(link.bandwidth)));
    }
    const topo::NodeId cpu = topology.host_cpu(gpu);
    if (cpu == topo::kNoNode || !cpus_done.insert(cpu).second) continue;
    topo::Node& host_cpu = topology.node(cpu);
    if (host && host->fit.beta > 0) {
      host_cpu.memcpy_bandwidth = std::min(1.0 / host->fit.beta, kMaxBandwidth);
      report.changes.push_back(fmt::format("{}: memcpy_bandwidth = {}", host_cpu.name,
                                           format_bandwidth(host_cpu.memcpy_bandwidth)));
    }
    // The driver stages a pageable copy through a pinned buffer at its own pace, which the
    // "host" micro-plan (a copy between two pinned buffers) does not measure: a pageable copy is
    // charged so that alone, where the staging is slower than the PCIe link, it takes its own
    // measured time per byte.
    set_traffic(host_cpu.pageable_traffic[0], d2h_pageable, host_cpu.memcpy_bandwidth,
                host_cpu.name + ": pageable_traffic.d2h", report);
    set_traffic(host_cpu.pageable_traffic[1], h2d_pageable, host_cpu.memcpy_bandwidth,
                host_cpu.name + ": pageable_traffic.h2d", report);
  }
  return report;
}

}  // namespace collsim::backend
