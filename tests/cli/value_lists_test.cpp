#include "tools/value_lists.hpp"

#include <catch2/catch.hpp>

#include "topology/error.hpp"

using namespace collsim;
using namespace collsim::cli;

namespace {

// The message of the InputError that `f` throws, or "" if it throws none.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("sizes accept decimal and binary units", "[cli][values]") {
  CHECK(parse_size_list("4096", "--size") == std::vector<Bytes>{4096});
  CHECK(parse_size_list("1KB", "--size") == std::vector<Bytes>{1000});
  CHECK(parse_size_list("1KiB", "--size") == std::vector<Bytes>{1024});
  CHECK(parse_size_list("1GiB", "--size") == std::vector<Bytes>{Bytes{1} << 30});
  CHECK(parse_size_list("1GB", "--size") == std::vector<Bytes>{1000000000});
  // ConvNeXt-Tiny's gradients: 28,589,128 fp32 parameters x 4 bytes.
  CHECK(parse_size_list("114356512", "--size") == std::vector<Bytes>{114356512});
}

TEST_CASE("lists and ranges expand in input order", "[cli][values]") {
  CHECK(parse_count_list("1,2,4,8,16", "--chunks") == std::vector<std::uint32_t>{1, 2, 4, 8, 16});
  // 1 x2 up to 64: 2^0 .. 2^6.
  CHECK(parse_count_list("1:64:x2", "--chunks") ==
        std::vector<std::uint32_t>{1, 2, 4, 8, 16, 32, 64});
  // The end is included only when the steps reach it: 3, 9, 27 (81 > 64).
  CHECK(parse_count_list("3:64:x3", "--chunks") == std::vector<std::uint32_t>{3, 9, 27});
  CHECK(parse_count_list("1:5:+2", "--chunks") == std::vector<std::uint32_t>{1, 3, 5});
  // Default step x2.
  CHECK(parse_count_list("4:16", "--chunks") == std::vector<std::uint32_t>{4, 8, 16});
  CHECK(parse_count_list("8, 1:2", "--chunks") == std::vector<std::uint32_t>{8, 1, 2});
  CHECK(parse_count_list("auto", "--chunks", true) == std::vector<std::uint32_t>{kAutoChunks});

  // 1 KiB x4 up to 4 GiB: 4^0..4^11 KiB = 12 sizes, the last 2^22 KiB = 4 GiB.
  const auto sizes = parse_size_list("1KiB:4GiB:x4", "--size");
  REQUIRE(sizes.size() == 12);
  CHECK(sizes.front() == 1024);
  CHECK(sizes.back() == Bytes{4} << 30);
  CHECK(parse_size_list("1MiB:8MiB:+1MiB", "--size").size() == 8);
  CHECK(parse_size_list("1MiB:8MiB:+1MiB", "--size")[7] == Bytes{8} << 20);
}

TEST_CASE("bad sizes and counts name the option and the fix", "[cli][values]") {
  CHECK_THAT(error_of([] { parse_size_list("0", "--size"); }),
             Catch::Contains("--size") && Catch::Contains("positive"));
  CHECK_THAT(error_of([] { parse_size_list("-1MiB", "--size"); }), Catch::Contains("positive"));
  CHECK_THAT(error_of([] { parse_size_list("12XB", "--size"); }), Catch::Contains("unit"));
  CHECK_THAT(error_of([] { parse_size_list("99999999999GiB", "--size"); }),
             Catch::Contains("maximum"));
  CHECK_THAT(error_of([] { parse_count_list("0", "--chunks"); }), Catch::Contains("at least 1"));
  CHECK_THAT(error_of([] { parse_count_list("-4", "--chunks"); }), Catch::Contains("negative"));
  CHECK_THAT(error_of([] { parse_count_list("2.5", "--chunks"); }),
             Catch::Contains("whole number"));
  CHECK_THAT(error_of([] { parse_count_list("auto", "--nranks"); }),
             Catch::Contains("whole number"));
  CHECK_THAT(error_of([] { parse_count_list("1,,2", "--chunks"); }), Catch::Contains("empty"));
  CHECK_THAT(error_of([] { parse_count_list("", "--chunks"); }), Catch::Contains("nothing"));
}

TEST_CASE("bad ranges are refused", "[cli][values]") {
  CHECK_THAT(error_of([] { parse_count_list("64:1:x2", "--chunks"); }),
             Catch::Contains("upwards") && Catch::Contains("1:64"));
  CHECK_THAT(error_of([] { parse_count_list("1:64:x1", "--chunks"); }), Catch::Contains("factor"));
  CHECK_THAT(error_of([] { parse_count_list("1:64:/2", "--chunks"); }), Catch::Contains("x2"));
  CHECK_THAT(error_of([] { parse_count_list("1:2:3:4", "--chunks"); }), Catch::Contains("colons"));
  CHECK_THAT(error_of([] { parse_size_list("1MiB:2MiB:+0", "--size"); }),
             Catch::Contains("positive"));
  // 1 B to 1 GiB by +1 B would be a billion points.
  CHECK_THAT(error_of([] { parse_size_list("1:1GiB:+1", "--size"); }),
             Catch::Contains("more than") && Catch::Contains("coarser"));
}

TEST_CASE("names of algorithms and collectives and data types", "[cli][values]") {
  const auto algos = parse_algo_list("ring,tree,hier,auto", "--algo");
  REQUIRE(algos.size() == 4);
  CHECK(*algos[0] == sched::Algorithm::ring);
  CHECK(*algos[1] == sched::Algorithm::tree);
  CHECK(*algos[2] == sched::Algorithm::hier);
  CHECK_FALSE(algos[3].has_value());
  CHECK(parse_collective("reduce-scatter", "--collective") == sched::Collective::reduce_scatter);
  CHECK(parse_dtype("bf16", "--dtype") == sched::DType::bf16);

  CHECK_THAT(error_of([] { parse_algo("rign", "--algo"); }),
             Catch::Contains("did you mean \"ring\"") && Catch::Contains("--algo"));
  CHECK_THAT(error_of([] { parse_algo("quantum", "--algo"); }),
             Catch::Contains("unknown algorithm") && !Catch::Contains("did you mean"));
  CHECK_THAT(error_of([] { parse_collective("allreduc", "--collective"); }),
             Catch::Contains("did you mean \"allreduce\""));
  CHECK_THAT(error_of([] { parse_dtype("fp64", "--dtype"); }), Catch::Contains("fp32, fp16, bf16"));
}

TEST_CASE("ranks by index or range or name", "[cli][values]") {
  topo::Topology t;
  for (int i = 0; i < 4; ++i) {
    topo::Node gpu;
    gpu.name = "gpu" + std::to_string(i);
    t.add_node(gpu);
  }
  topo::Node cpu;
  cpu.name = "cpu0";
  cpu.kind = topo::NodeKind::cpu;
  t.add_node(cpu);
  topo::finalize(t);
  const auto& g = t.gpus();
  REQUIRE(g.size() == 4);

  CHECK(parse_ranks("", t, "--ranks") == g);
  CHECK(parse_ranks("0-1,3", t, "--ranks") == std::vector<topo::NodeId>{g[0], g[1], g[3]});
  CHECK(parse_ranks("gpu2,0", t, "--ranks") == std::vector<topo::NodeId>{g[2], g[0]});
  CHECK(describe_ranks(parse_ranks("0-1,3", t, "--ranks"), t) == "0-1,3");
  CHECK(describe_ranks(parse_ranks("3,0-2", t, "--ranks"), t) == "3,0-2");
  const topo::NodeId not_a_gpu = t.find("cpu0");
  CHECK(describe_ranks(std::vector<topo::NodeId>{g[0], not_a_gpu}, t) == "?");

  CHECK_THAT(error_of([&] { parse_ranks("0-4", t, "--ranks"); }),
             Catch::Contains("out of range") && Catch::Contains("0 to 3"));
  CHECK_THAT(error_of([&] { parse_ranks("gpu9", t, "--ranks"); }), Catch::Contains("gpu"));
  CHECK_THAT(error_of([&] { parse_ranks("cpu0", t, "--ranks"); }), Catch::Contains("not a GPU"));
  CHECK_THAT(error_of([&] { parse_ranks("0,gpu0", t, "--ranks"); }), Catch::Contains("twice"));
  CHECK_THAT(error_of([&] { parse_ranks("3-1", t, "--ranks"); }), Catch::Contains("1-3"));
}
