#pragma once
// A one-line progress bar on stderr: done/total, elapsed time and an estimate of the time left.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>

namespace collsim::cli {

class Progress {
 public:
  // Draws nothing unless `enabled`; callers enable it when stderr is a terminal or on request.
  Progress(std::FILE* out, bool enabled);
  // Redraws at most a few times a second, and always for the last point. `running`: the shares
  // done of the points still running, summed, which the bar and the time left count too.
  void update(std::size_t done, std::size_t total, double running = 0);
  // A line of free text with the elapsed time, and the time left where the caller can tell
  // (`left_seconds` >= 0): drawn once the work has taken a second, then at most a few times a
  // second.
  void status(std::string_view text, double left_seconds = -1);
  // Ends the line so that later messages start on their own.
  void finish();
  // Wipes the bar (it is redrawn by the next update), so that rows printed to the same terminal
  // do not land behind it.
  void clear();

  bool enabled() const { return enabled_; }
  // stderr is a terminal (the default for showing the bar).
  static bool stderr_is_terminal();

 private:
  std::FILE* out_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

// A status line kept moving from a thread of its own: it redraws the last text with its elapsed
// time every quarter second until a new text comes, so that a stage that reports nothing itself
// (loading a large topology, generating and registering a whole plan: seconds each at 100,000
// GPUs) shows that it is still working, as the simulation's own reports do. Thread-safe.
class LiveStatus {
 public:
  explicit LiveStatus(Progress& progress);
  // Stops redrawing and wipes the line, so that a message printed next (an error thrown past
  // the caller) starts on a clean line.
  ~LiveStatus();
  LiveStatus(const LiveStatus&) = delete;
  LiveStatus& operator=(const LiveStatus&) = delete;

  void status(std::string text, double left_seconds = -1);  // as Progress::status
  void clear();   // as Progress::clear; nothing is redrawn until the next status()
  void finish();  // as Progress::finish; likewise

 private:
  void redraw(std::stop_token stop);

  Progress& progress_;
  std::mutex mutex_;
  std::condition_variable_any wake_;
  std::string text_;  // empty: nothing to redraw
  double left_ = -1;
  std::jthread thread_;  // last: it starts once the members it reads exist
};

}  // namespace collsim::cli
