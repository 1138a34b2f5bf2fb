// The parts of the MPI sweep mode that need no MPI: how results travel between ranks and how a
// launch is detected. tests/cli/mpi_sweep_test.sh runs the mode itself under mpirun.
#include "tools/mpi_sweep.hpp"

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "topology/error.hpp"

using namespace collsim;
using namespace collsim::cli;
using namespace std::string_literals;

TEST_CASE("a result crosses between ranks bit for bit", "[cli][mpi]") {
  Evaluation ev;
  ev.row.collective = sched::Collective::alltoall;
  ev.row.algo = "direct";
  ev.row.topology = "a, \"quoted\"\nname";
  ev.row.ranks = 1024;
  ev.row.size = (std::uint64_t{1} << 40) + 2;
  ev.row.dtype = sched::DType::bf16;
  ev.row.chunks = 64;
  ev.row.time = 0.1 + 0.2;  // not 0.3: the last bit must survive
  ev.row.events = std::numeric_limits<std::uint64_t>::max();
  ev.row.wall = std::numeric_limits<double>::denorm_min();
  ev.terms.copy = 1.0 / 3.0;
  ev.terms.link = -0.0;
  ev.internal_error = true;
  ev.interrupted = false;
  ev.row.error = "k = 512 is larger than the element count\0 256"s;  // any byte survives

  std::size_t index = 0;
  const Evaluation back = mpi::decode(mpi::encode(12345, ev), index);
  CHECK(index == 12345);
  CHECK(back.row.collective == ev.row.collective);
  CHECK(back.row.algo == ev.row.algo);
  CHECK(back.row.topology == ev.row.topology);
  CHECK(back.row.ranks == ev.row.ranks);
  CHECK(back.row.size == ev.row.size);
  CHECK(back.row.dtype == ev.row.dtype);
  CHECK(back.row.chunks == ev.row.chunks);
  CHECK(back.row.events == ev.row.events);
  CHECK(back.row.error == ev.row.error);
  CHECK(back.internal_error);
  CHECK_FALSE(back.interrupted);
  CHECK(std::bit_cast<std::uint64_t>(back.row.time) == std::bit_cast<std::uint64_t>(ev.row.time));
  CHECK(back.row.wall == ev.row.wall);
  CHECK(back.terms.copy == ev.terms.copy);
  CHECK(std::signbit(back.terms.link));
}

TEST_CASE("a truncated or padded result is refused, not misread", "[cli][mpi]") {
  Evaluation ev;
  ev.row.algo = "ring";
  ev.row.error = "interrupted";
  ev.interrupted = true;
  const std::string bytes = mpi::encode(7, ev);
  std::size_t index = 0;
  CHECK(mpi::decode(bytes, index).interrupted);
  CHECK_THROWS_AS(mpi::decode(bytes.substr(0, bytes.size() - 1), index), InternalError);
  CHECK_THROWS_AS(mpi::decode(bytes + "x", index), InternalError);
  CHECK_THROWS_AS(mpi::decode("", index), InternalError);
}

TEST_CASE("an MPI launch is recognised by its environment", "[cli][mpi]") {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"})
    ::unsetenv(name);
  CHECK(mpi::launcher_world_size() == 1);
  ::setenv("PMIX_RANK", "0", 1);
  CHECK(mpi::launcher_world_size() == 0);  // a launcher that does not say how many: ask MPI
  ::setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  CHECK(mpi::launcher_world_size() == 4);
  ::setenv("OMPI_COMM_WORLD_SIZE", "1", 1);
  CHECK(mpi::launcher_world_size() == 1);
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  ::unsetenv("PMIX_RANK");
  ::setenv("PMI_SIZE", "2", 1);
  CHECK(mpi::launcher_world_size() == 2);
  ::unsetenv("PMI_SIZE");
  CHECK(mpi::usable_cpus() >= 1);
}

TEST_CASE("failures map to main's exit statuses", "[cli][mpi]") {
  const auto input = mpi::describe(std::make_exception_ptr(InputError("", "--size", "bad")));
  CHECK(input.code == 2);
  CHECK(input.message.rfind("error: ", 0) == 0);
  CHECK(mpi::describe(std::make_exception_ptr(InternalError("bug"))).code == 3);
  CHECK(mpi::describe(std::make_exception_ptr(Interrupted("stop"))).code == 130);
}
