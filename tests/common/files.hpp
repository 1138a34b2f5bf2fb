#pragma once
// Files of the tests that run collsim: a scratch folder and whole-file reads.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

namespace collsim::test {

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A scratch folder for this test process, under the system temp dir and named after the
// process, removed when the process exits: catch_discover_tests runs every test case in a
// process of its own, and a folder left behind by each piled up in /tmp run after run.
// Created on first use. Children started with fork() and exec() never run its removal; a child
// that fails to exec must leave with _exit().
inline std::filesystem::path scratch_dir() {
  struct Scratch {
    std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("collsim-test-" + std::to_string(::getpid()));
    Scratch() { std::filesystem::create_directories(dir); }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    ~Scratch() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  };
  static const Scratch scratch;
  return scratch.dir;
}

}  // namespace collsim::test
