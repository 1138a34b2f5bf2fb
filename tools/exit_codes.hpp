#pragma once
#include <stdexcept>

namespace collsim::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 1;  // the run worked but a check it makes did not pass
inline constexpr int kExitUsage = 2;        // bad input file, value or command line
inline constexpr int kExitInternal = 3;     // a bug in collsim

// Thrown by commands whose purpose is a check (plan verify, validate) when the check fails.
class CheckFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace collsim::cli
