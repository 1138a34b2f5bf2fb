// The parts of the collsim executable that these tests call directly. The executable's sources
// are not a library, so they are compiled into the test binary once, here.
#include "tools/report.cpp"       // NOLINT(bugprone-suspicious-include)
#include "tools/sweep.cpp"        // NOLINT(bugprone-suspicious-include)
#include "tools/value_lists.cpp"  // NOLINT(bugprone-suspicious-include)
#include "tools/resource_guard.cpp"  // NOLINT(bugprone-suspicious-include)
