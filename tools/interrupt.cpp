#include "tools/interrupt.hpp"

#include <csignal>

namespace collsim::cli {
namespace {

std::atomic<bool> interrupted{false};

extern "C" void on_interrupt(int /*signal*/) {
  interrupted.store(true, std::memory_order_relaxed);
  // The next Ctrl-C takes the default action: the user insists.
  std::signal(SIGINT, SIG_DFL);
}

}  // namespace

const std::atomic<bool>* install_interrupt_handler() {
  static const bool installed = [] {
    std::signal(SIGINT, on_interrupt);
    return true;
  }();
  (void)installed;
  return &interrupted;
}

}  // namespace collsim::cli
