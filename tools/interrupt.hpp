#pragma once
// Ctrl-C during run or sweep: the first one asks the engines to stop at their next check and the
// sweep to skip the points not yet started, so that what is finished still gets printed; a
// second one ends the process at once.
#include <atomic>

namespace collsim::cli {

// Installs the SIGINT handler (idempotent) and returns the flag it sets.
const std::atomic<bool>* install_interrupt_handler();

// Exit status after an interruption, as shells report a process ended by SIGINT.
inline constexpr int kExitInterrupted = 130;

}  // namespace collsim::cli
