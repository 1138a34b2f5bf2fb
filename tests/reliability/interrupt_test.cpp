// Ctrl-C stops a long run or sweep cleanly: exit status 130, a message saying it was
// interrupted, no crash and no partial number passed off as a result.
#include <catch2/catch.hpp>
#include <string>

#include "tests/reliability/process.hpp"

namespace collsim::reliability {
namespace {

// Ring allreduce on all 1024 GPUs of the cluster with k = 4 simulates about 25 million events,
// tens of seconds, so the interrupt lands inside the simulation: it is sent after 1.5 s, once
// the process has installed its handler. Its events are cheap, so the engine's poll (every 4096
// events) answers within milliseconds.
const std::vector<std::string> kLong = {"--topology", "configs/cluster-1024.json",
                                        "--algo",     "ring",
                                        "--chunks",   "4",
                                        "--size",     "1GiB",
                                        "--format",   "csv",
                                        "--no-wall"};

Outcome interrupted(const std::string& command, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args{command};
  args.insert(args.end(), kLong.begin(), kLong.end());
  args.insert(args.end(), extra.begin(), extra.end());
  return run_process(args, std::chrono::seconds(60), COLLSIM_BINARY, 8192,
                     std::chrono::milliseconds(1500));
}

}  // namespace

TEST_CASE("Ctrl-C stops collsim run cleanly with exit status 130", "[reliability][interrupt]") {
  const Outcome o = interrupted("run");
  INFO("stderr: " << o.err << "\nstdout: " << o.out);
  REQUIRE_FALSE(o.timed_out);
  CHECK(o.signal == 0);
  CHECK(o.exit_code == 130);
  CHECK(o.err.find("interrupted") != std::string::npos);
  CHECK(o.err.find("internal error") == std::string::npos);
  // It says how far it got.
  CHECK(o.err.find("events, at simulated time") != std::string::npos);
  // No result row: the header at most.
  CHECK(o.out.find("allreduce,ring") == std::string::npos);
}

TEST_CASE("Ctrl-C stops collsim run --progress with its line ended before the message",
          "[reliability][interrupt]") {
  // The status line is kept moving by a thread of its own, still running when the process
  // exits on the interrupt.
  const Outcome o = interrupted("run", {"--progress"});
  INFO("stderr: " << o.err);
  REQUIRE_FALSE(o.timed_out);
  CHECK(o.signal == 0);
  CHECK(o.exit_code == 130);
  CHECK(o.err.find("allreduce k=4: ") != std::string::npos);         // drawn: the run took a second
  CHECK(o.err.find("\ncollsim: interrupted") != std::string::npos);  // on a line of its own
  CHECK(o.err.find("internal error") == std::string::npos);
}

TEST_CASE("Ctrl-C stops collsim sweep cleanly with exit status 130", "[reliability][interrupt]") {
  const Outcome o = interrupted("sweep");
  INFO("stderr: " << o.err << "\nstdout: " << o.out);
  REQUIRE_FALSE(o.timed_out);
  CHECK(o.signal == 0);
  CHECK(o.exit_code == 130);
  CHECK(o.err.find("interrupted") != std::string::npos);
  CHECK(o.err.find("internal error") == std::string::npos);
}

}  // namespace collsim::reliability
