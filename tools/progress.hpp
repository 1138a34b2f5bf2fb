#pragma once
// A one-line progress bar on stderr: done/total, elapsed time and an estimate of the time left.
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string_view>

namespace collsim::cli {

class Progress {
 public:
  // Draws nothing unless `enabled`; callers enable it when stderr is a terminal or on request.
  Progress(std::FILE* out, bool enabled);
  // Redraws at most a few times a second, and always for the last point.
  void update(std::size_t done, std::size_t total);
  // A line of free text with the elapsed time, and the time left where the caller can tell
  // (`left_seconds` >= 0): drawn once the work has taken a second, then at most a few times a
  // second.
  void status(std::string_view text, double left_seconds = -1);
  // Ends the line so that later messages start on their own.
  void finish();
  // Wipes the bar (it is redrawn by the next update), so that rows printed to the same terminal
  // do not land behind it.
  void clear();

  // stderr is a terminal (the default for showing the bar).
  static bool stderr_is_terminal();

 private:
  std::FILE* out_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace collsim::cli
