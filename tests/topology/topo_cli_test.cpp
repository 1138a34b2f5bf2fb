// The `collsim topo` commands, run as a user would: output, exit status, determinism.
#include <sys/wait.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <string>

#include "topology_test_util.hpp"

namespace {

struct Run {
  int status = -1;
  std::string out;  // stdout and stderr together
};

Run run(const std::string& args) {
  INFO("the collsim executable is built with the tests: " << COLLSIM_BINARY);
  REQUIRE(std::filesystem::exists(COLLSIM_BINARY));
  const std::string command = std::string(COLLSIM_BINARY) + " " + args + " 2>&1";
  Run r;
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    r.out.append(buffer.data(), n);
  const int raw = pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

std::string config(const char* name) {
  return collsim::test::config_path(name);
}

}  // namespace

TEST_CASE("topo validate: ok, or every error with exit status 2") {
  const Run ok = run("topo validate " + config("dgx-h100.json"));
  CHECK(ok.status == 0);
  CHECK(ok.out.rfind("ok: dgx-h100: 23 nodes (8 GPUs)", 0) == 0);
  const Run missing = run("topo validate /nonexistent.json");
  CHECK(missing.status == 2);
  CHECK(missing.out.find("file not found") != std::string::npos);
}

TEST_CASE("topo route prints hops, totals and the path class") {
  const Run r = run("topo route " + config("dgx-h100.json") + " gpu0 gpu1");
  CHECK(r.status == 0);
  CHECK(r.out.find("route gpu0 -> gpu1: 2 hops, path class NVL") != std::string::npos);
  CHECK(r.out.find("gpu0 -> nvswitch  nvlink  bandwidth 450 GB/s  latency 100 ns") !=
        std::string::npos);
  CHECK(r.out.find("total: latency 200 ns, bottleneck bandwidth 450 GB/s") != std::string::npos);
  // GPU ranks work too, and unknown names get a suggestion.
  CHECK(run("topo route " + config("dgx-h100.json") + " 0 1").out == r.out);
  const Run bad = run("topo route " + config("dgx-h100.json") + " gpu0 gpu9x");
  CHECK(bad.status == 2);
  CHECK(bad.out.find("no node named \"gpu9x\"") != std::string::npos);
}

TEST_CASE("topo route shows the path collsim run's transfers take, under either routing") {
  const std::string route = "topo route " + config("cluster-1024.json") + " 0 1000";
  // ECMP by default, as collsim run: the path its flows from rank 0 to rank 1000 hash to.
  const Run ecmp = run(route);
  REQUIRE(ecmp.status == 0);
  CHECK(
      ecmp.out.find("routing: ecmp, flow key 1000, that of a transfer from rank 0 to rank 1000") !=
      std::string::npos);
  const Run keyed = run(route + " --flow-key 1000");
  REQUIRE(keyed.status == 0);
  const auto hops = [](const std::string& out) { return out.substr(0, out.find("routing:")); };
  CHECK(hops(keyed.out) == hops(ecmp.out));
  CHECK(keyed.out.find("routing: ecmp, flow key 1000 (--flow-key)") != std::string::npos);
  CHECK(run(route + " --ecmp").out == ecmp.out);
  const Run shortest = run(route + " --routing shortest");
  REQUIRE(shortest.status == 0);
  CHECK(shortest.out.find("routing: shortest") != std::string::npos);
  // Not a GPU at one end: key 0.
  const Run nic = run("topo route " + config("cluster-1024.json") + " dgx000/nic0 1000");
  CHECK(nic.out.find("routing: ecmp, flow key 0\n") != std::string::npos);
  const Run typo = run(route + " --routing shortes");
  CHECK(typo.status == 2);
  CHECK(typo.out.find("did you mean \"shortest\"") != std::string::npos);
  CHECK(run(route + " --ecmp --routing shortest").status == 2);
}

TEST_CASE("topo show is deterministic and counts by kind") {
  const Run a = run("topo show " + config("hetero-rack.json"));
  const Run b = run("topo show " + config("hetero-rack.json"));
  CHECK(a.status == 0);
  CHECK(a.out == b.out);
  // 2 x (4 GPUs + switch + CPU + NIC) + 2 x the same + one top-of-rack switch = 29 nodes.
  CHECK(a.out.find("nodes: 29 (gpu 16, nvswitch 0, pcie_switch 4, cpu 4, nic 4, switch 1)") !=
        std::string::npos);
  CHECK(a.out.find("racks: 1") != std::string::npos);
  CHECK(a.out.find("NVL") != std::string::npos);
  CHECK(a.out.find("NET") != std::string::npos);
  CHECK(a.out.find("diameter: 6 hops") != std::string::npos);
}

TEST_CASE("topo show lists each distinct set of GPU and CPU parameters") {
  const Run rack = run("topo show " + config("hetero-rack.json"));
  REQUIRE(rack.status == 0);
  CHECK(rack.out.find("gpu parameters (16 GPUs, 2 distinct):\n"
                      "       8 GPUs like hgx0/gpu0: model \"A100-SXM4-80GB\"  memory 2.039 TB/s  "
                      "copy engines 3  alpha 5 us  launch 4 us  event 0 s  reduce traffic fp32 3, "
                      "fp16 3, bf16 3\n"
                      "       8 GPUs like a10box0/gpu0: model \"A10\"  memory 600 GB/s") !=
        std::string::npos);
  CHECK(rack.out.find(
            "cpu parameters (4 CPUs, 1 distinct):\n"
            "       4 CPUs like hgx0/cpu0: memcpy 10 GB/s  pageable traffic d2h 1, h2d 1") !=
        std::string::npos);
  // With a calibration, the parameters a run would simulate: the H200's of 2026-11-30, its
  // pageable copies charged 10.9 and 12.3 GB/s against the host fit's 7.85 GB/s.
  const std::string calibration =
      std::string(COLLSIM_SOURCE_DIR) + "/docs/data/h200-2026-11-30/calibration.json";
  const Run h200 =
      run("topo show " + config("one-gpu-4ranks.json") + " --calibration " + calibration);
  REQUIRE(h200.status == 0);
  CHECK(h200.out.find("calibration: " + calibration + " (cuda backend, device \"NVIDIA H200\"") !=
        std::string::npos);
  CHECK(h200.out.find("4 GPUs like rank0: model \"NVIDIA H200\"  memory 5.04388 TB/s") !=
        std::string::npos);
  CHECK(h200.out.find("1 CPU like cpu0: memcpy 7.84889 GB/s  pageable traffic d2h 0.7206, "
                      "h2d 0.6402") != std::string::npos);
  const Run uncalibrated = run("topo show " + config("one-gpu-4ranks.json"));
  CHECK(uncalibrated.out.find("memcpy unlimited  pageable traffic d2h 1, h2d 1") !=
        std::string::npos);
  const Run wrong = run("topo show " + config("dgx-h100.json") + " --calibration " + calibration);
  CHECK(wrong.status == 2);
  CHECK(wrong.out.find("\"NVIDIA H200\"") != std::string::npos);
}

TEST_CASE("topo dot and --help") {
  const Run dot = run("topo dot " + config("t4x4-pcie.json"));
  CHECK(dot.status == 0);
  CHECK(dot.out.rfind("digraph \"t4x4-pcie\" {", 0) == 0);
  CHECK(dot.out.find("\"gpu0\" -> \"pcie0\"") != std::string::npos);
  for (const char* sub : {"show", "validate", "route", "dot"}) {
    const Run help = run(std::string("topo ") + sub + " --help");
    CHECK(help.status == 0);
    CHECK(help.out.find("FILE") != std::string::npos);
  }
}
