#include "tools/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace collsim::cli {
namespace {

// Wide enough for the longest line, so that a shorter one overwrites it completely.
constexpr int kLineWidth = 79;

std::string clock_text(double seconds) {
  const long long s = std::llround(seconds);
  if (s >= 3600) return fmt::format("{}h{:02}m{:02}s", s / 3600, s / 60 % 60, s % 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{:.1f}s", seconds);
}

}  // namespace

Progress::Progress(std::FILE* out, bool enabled)
    : out_(out), enabled_(enabled), start_(std::chrono::steady_clock::now()), last_draw_() {}

bool Progress::stderr_is_terminal() {
  return isatty(STDERR_FILENO) == 1;
}

void Progress::update(std::size_t done, std::size_t total, double running) {
  if (!enabled_ || total == 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (done < total && drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  drawn_ = true;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  // The points done and the running points' shares: a sweep of a few long points moves before
  // its first point ends. Never more than all.
  const double progress =
      std::min(static_cast<double>(done) + std::max(running, 0.0), static_cast<double>(total));
  constexpr std::size_t kWidth = 24;
  const auto filled = static_cast<std::size_t>(progress * kWidth / static_cast<double>(total));
  std::string bar(filled, '#');
  bar.resize(kWidth, '.');
  // The estimate assumes the work left costs what the work done did on average.
  const std::string left =
      progress <= 0 ? std::string("?")
                    : clock_text(elapsed * (static_cast<double>(total) - progress) / progress);
  const std::string share =
      progress > static_cast<double>(done) ? fmt::format(" +{:.2f}", progress - done) : "";
  const std::string line = fmt::format("[{}] {}/{} points{}, {} elapsed, {} left", bar, done, total,
                                       share, clock_text(elapsed), left);
  fmt::print(out_, "\r{:<{}}", line, kLineWidth);
  std::fflush(out_);
}

void Progress::status(std::string_view text, double left_seconds) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  // Work that ends within a second never draws: the line would only flicker.
  if (!drawn_ && now - start_ < std::chrono::seconds(1)) return;
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  drawn_ = true;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const std::string left =
      left_seconds >= 0 ? fmt::format(", about {} left", clock_text(left_seconds)) : "";
  fmt::print(out_, "\r{:<{}}", fmt::format("{}, {} elapsed{}", text, clock_text(elapsed), left),
             kLineWidth);
  std::fflush(out_);
}

void Progress::clear() {
  if (enabled_ && drawn_) {
    fmt::print(out_, "\r{:{}}\r", "", kLineWidth);
    std::fflush(out_);
    drawn_ = false;
  }
}

void Progress::finish() {
  if (enabled_ && drawn_) {
    fmt::print(out_, "\n");
    std::fflush(out_);
  }
  drawn_ = false;
}

LiveStatus::LiveStatus(Progress& progress)
    : progress_(progress), thread_([this](std::stop_token stop) { redraw(stop); }) {}

LiveStatus::~LiveStatus() {
  thread_.request_stop();
  thread_.join();
  clear();
}

void LiveStatus::status(std::string text, double left_seconds) {
  const std::lock_guard lock(mutex_);
  text_ = std::move(text);
  left_ = left_seconds;
  progress_.status(text_, left_);
}

void LiveStatus::clear() {
  const std::lock_guard lock(mutex_);
  text_.clear();
  progress_.clear();
}

void LiveStatus::finish() {
  const std::lock_guard lock(mutex_);
  text_.clear();
  progress_.finish();
}

void LiveStatus::redraw(std::stop_token stop) {
  std::unique_lock lock(mutex_);
  // Progress::status itself waits out the first second and draws at most ten times a second.
  while (!wake_.wait_for(lock, stop, std::chrono::milliseconds(250), [] { return false; }) &&
         !stop.stop_requested())
    if (!text_.empty()) progress_.status(text_, left_);
}

}  // namespace collsim::cli
