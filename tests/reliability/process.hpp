#pragma once
// Runs the collsim binary as a child process and reports how it ended: exit status, signal, or
// killed by the hang guard. std::system cannot tell a hang from a slow run, and a hang is exactly
// what the reliability catalogue has to catch.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/files.hpp"

namespace collsim::reliability {

struct Outcome {
  int exit_code = -1;      // valid when the process exited
  int signal = 0;          // non-zero when a signal ended it (a crash or an abort)
  bool timed_out = false;  // the hang guard killed it
  double peak_rss = 0;     // bytes of resident memory at the most, when it ended by itself
  std::string out;
  std::string err;
};

using test::read_file;
using test::scratch_dir;

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

// Runs `binary args...` in the repository root with stdin from /dev/null. The address space is
// capped (except under ASan, which reserves terabytes of it) so that a runaway allocation fails
// inside collsim, where it must be reported, instead of taking the machine down. The hang guard
// is generous: every catalogue case answers in well under a second.
// Whether `pid` has installed a SIGINT handler yet (Linux: the SigCgt mask of /proc/PID/status).
// A Ctrl-C that lands before the handler would kill the process with the default action, which
// is not what a test of the handler means to check.
inline bool catches_sigint(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("SigCgt:", 0) == 0) {
      const unsigned long long mask = std::stoull(line.substr(7), nullptr, 16);
      return ((mask >> (SIGINT - 1)) & 1) != 0;
    }
  return true;  // no /proc: fall back on the delay alone
}

// `interrupt_after` > 0 sends SIGINT (Ctrl-C) once that much time has passed.
inline Outcome run_process(
    const std::vector<std::string>& args,
    std::chrono::seconds hang_guard = std::chrono::seconds(60),
    const std::string& binary = COLLSIM_BINARY, unsigned long address_space_mib = 4096,
    std::chrono::milliseconds interrupt_after = std::chrono::milliseconds(0)) {
  static int counter = 0;
  const auto dir = scratch_dir();
  const auto out_path = dir / ("out" + std::to_string(counter) + ".txt");
  const auto err_path = dir / ("err" + std::to_string(counter) + ".txt");
  ++counter;

  std::vector<std::string> argv_store;
  argv_store.push_back(binary);
  argv_store.insert(argv_store.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_store) argv.push_back(a.data());
  argv.push_back(nullptr);

  const pid_t pid = ::fork();
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0) ::_exit(126);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    if (::chdir(COLLSIM_SOURCE_DIR) != 0) ::_exit(126);
    if (!kSanitized && address_space_mib > 0) {
      struct rlimit limit {};
      limit.rlim_cur = limit.rlim_max = static_cast<rlim_t>(address_space_mib) << 20;
      ::setrlimit(RLIMIT_AS, &limit);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  Outcome o;
  if (pid < 0) return o;
  int status = 0;
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + hang_guard;
  bool interrupted = false;
  for (;;) {
    rusage usage{};
    const pid_t r = ::wait4(pid, &status, WNOHANG, &usage);
    if (r == pid) {
      o.peak_rss = static_cast<double>(usage.ru_maxrss) * 1024;  // KiB on Linux
      break;
    }
    if (interrupt_after.count() > 0 && !interrupted &&
        std::chrono::steady_clock::now() > started + interrupt_after && catches_sigint(pid)) {
      ::kill(pid, SIGINT);
      interrupted = true;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      o.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (!o.timed_out) {
    if (WIFEXITED(status)) o.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) o.signal = WTERMSIG(status);
  }
  o.out = read_file(out_path);
  o.err = read_file(err_path);
  std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  return o;
}

}  // namespace collsim::reliability
