#pragma once
// The --huge-pages option, shared by collsim and the benchmarks: which large arrays are advised
// 2 MiB pages (topology/huge_pages.hpp).
#include <CLI/CLI.hpp>
#include <string>

#include "topology/huge_pages.hpp"

namespace collsim::cli {

// Adds --huge-pages[=off|hot|all] (bare: all), also read from COLLSIM_HUGE_PAGES, where 1, true,
// on and yes mean all and 0, false and no mean off, as they did when the option was a switch.
// `value` holds the default and receives the choice.
inline CLI::Option* add_huge_pages_option(CLI::App& app, std::string& value) {
  return app
      .add_option("--huge-pages", value,
                  "Which large arrays get 2 MiB pages from Linux: off; hot, those every event "
                  "reads (the engine's op records, flows and links); or all, with the plan's "
                  "columns. Huge pages save TLB misses but their first touch is slower on "
                  "virtual machines that return freed memory to their host")
      ->expected(0, 1)
      ->envname("COLLSIM_HUGE_PAGES")
      ->transform(CLI::Transformer({{"1", "all"},
                                    {"true", "all"},
                                    {"on", "all"},
                                    {"yes", "all"},
                                    {"0", "off"},
                                    {"false", "off"},
                                    {"no", "off"}})
                      .description(""))
      ->check(CLI::IsMember({"off", "hot", "all"}))
      ->option_text("[=MODE]  off|hot|all; bare: all; default: " + value);
}

// The advice an option value names; the value is one that add_huge_pages_option accepted, or
// empty for the bare option.
inline huge_pages::Advice huge_pages_advice(const std::string& value) {
  if (value.empty() || value == "all") return huge_pages::Advice::all;
  if (value == "hot") return huge_pages::Advice::hot;
  return huge_pages::Advice::off;
}

}  // namespace collsim::cli
