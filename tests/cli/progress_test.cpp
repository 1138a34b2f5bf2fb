// The status line of long runs: a stage that reports nothing itself is still shown, with its
// elapsed time, and the line is wiped when the caller is done or leaves on an error.
#include "tools/progress.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

using namespace collsim::cli;

namespace {

// A file the status line is written to, read back as a whole.
class Captured {
 public:
  Captured() {
    char name[] = "/tmp/collsim-progress-XXXXXX";
    const int fd = mkstemp(name);
    REQUIRE(fd >= 0);
    path_ = name;
    file_ = fdopen(fd, "w");
    REQUIRE(file_ != nullptr);
  }
  ~Captured() {
    std::fclose(file_);
    std::remove(path_.c_str());
  }
  std::FILE* file() const { return file_; }
  std::string text() const {
    std::ifstream in(path_);
    std::ostringstream all;
    all << in.rdbuf();
    return all.str();
  }
  // Waits until the file holds `what`, for 20 s at most: the line is drawn after a second, and a
  // loaded machine may take longer, but never forever.
  bool shows(const std::string& what) const {
    for (int i = 0; i < 200; ++i) {
      if (text().find(what) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace

TEST_CASE("a status set once is drawn with its elapsed time while nothing else reports",
          "[cli][progress]") {
  Captured out;
  Progress progress(out.file(), true);
  {
    LiveStatus live(progress);
    // Set within the first second, when the line is not drawn yet: only the redrawing thread
    // can show it.
    live.status("tree allreduce k=8: registering its 12 ops");
    CHECK(out.text().empty());
    CHECK(out.shows("tree allreduce k=8: registering its 12 ops, "));
    CHECK(out.shows(" elapsed"));
    live.clear();
    const std::string cleared = out.text();
    CHECK(cleared.back() == '\r');  // wiped
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    CHECK(out.text() == cleared);  // and not drawn again

    live.status("loading big.json");
    CHECK(out.shows("loading big.json, "));
  }
  // Leaving the scope (as an error thrown past it does) wipes the line.
  const std::string left = out.text();
  CHECK(left.back() == '\r');
  CHECK(left.substr(left.rfind("loading big.json")).find('\r') != std::string::npos);
}

TEST_CASE("a status line that is not enabled draws nothing", "[cli][progress]") {
  Captured out;
  Progress progress(out.file(), false);
  {
    LiveStatus live(progress);
    live.status("loading big.json");
    std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  }
  CHECK(out.text().empty());
}
