#include "tools/value_lists.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <functional>
#include <limits>

#include "topology/error.hpp"

namespace collsim::cli {
namespace {

constexpr std::array kDTypes = {sched::DType::fp32, sched::DType::fp16, sched::DType::bf16};
constexpr std::array kHostMemories = {sched::HostMemory::pinned, sched::HostMemory::pageable};

[[noreturn]] void fail(const std::string& option, std::string message) {
  throw InputError("", option, std::move(message));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string join(std::span<const std::string_view> names) {
  std::string out;
  for (std::string_view n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

// Parses a whole, unsigned decimal integer; nullopt for anything else (signs, blanks, overflow).
std::optional<std::uint64_t> parse_uint(std::string_view s) {
  std::uint64_t v = 0;
  if (s.empty()) return std::nullopt;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// Expands one list of values and ranges. `parse_one` turns a single value into a number or
// throws InputError; `what` names the quantity in messages ("size", "chunk count").
std::vector<std::uint64_t> expand(std::string_view text, const std::string& option,
                                  std::string_view what,
                                  const std::function<std::uint64_t(std::string_view)>& parse_one) {
  std::vector<std::uint64_t> out;
  if (trim(text).empty())
    fail(option, fmt::format("expected at least one {}; found nothing", what));
  for (std::string_view item : split_list(text)) {
    if (item.empty())
      fail(option,
           fmt::format("empty entry in the list \"{}\"; separate values with single commas, "
                       "as in 1,2,4",
                       text));
    std::vector<std::string_view> parts;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= item.size(); ++i) {
      if (i == item.size() || item[i] == ':') {
        parts.push_back(trim(item.substr(start, i - start)));
        start = i + 1;
      }
    }
    if (parts.size() == 1) {
      out.push_back(parse_one(parts[0]));
    } else if (parts.size() == 2 || parts.size() == 3) {
      const std::uint64_t first = parse_one(parts[0]);
      const std::uint64_t last = parse_one(parts[1]);
      if (first > last)
        fail(option,
             fmt::format("range \"{}\" starts above its end; ranges go upwards, as in {}:{}", item,
                         parts[1], parts[0]));
      std::uint64_t factor = 2;
      std::uint64_t increment = 0;
      if (parts.size() == 3) {
        const std::string_view step = parts[2];
        if (!step.empty() && (step[0] == 'x' || step[0] == '*')) {
          const auto f = parse_uint(trim(step.substr(1)));
          if (!f || *f < 2 || *f > 1024)
            fail(option, fmt::format("step \"{}\" in range \"{}\" is not a whole factor from 2 to "
                                     "1024; write it as x2 or x4",
                                     step, item));
          factor = *f;
        } else if (!step.empty() && step[0] == '+') {
          factor = 0;
          increment = parse_one(trim(step.substr(1)));
        } else {
          fail(option, fmt::format("step \"{}\" in range \"{}\" is neither a factor (x2) nor an "
                                   "increment (+1MiB, +1); write the range as start:end:x2",
                                   step, item));
        }
      }
      for (std::uint64_t v = first; v <= last;) {
        out.push_back(v);
        if (out.size() > kMaxListValues) break;
        const std::uint64_t next = factor != 0 ? v * factor : v + increment;
        if ((factor != 0 && v > std::numeric_limits<std::uint64_t>::max() / factor) || next <= v)
          break;
        v = next;
      }
    } else {
      fail(option,
           fmt::format("\"{}\" has {} colons; a range is start:end or start:end:step, as in "
                       "1:64:x2",
                       item, parts.size() - 1));
    }
    if (out.size() > kMaxListValues)
      fail(option,
           fmt::format("\"{}\" gives more than {} {}s; use a coarser step (x2 rather than +1) "
                       "or split the sweep",
                       text, kMaxListValues, what));
  }
  return out;
}

template <typename Enum>
Enum parse_name(std::string_view text, const std::string& option, std::string_view what,
                std::span<const Enum> values, std::string_view extra = {}) {
  std::string name(trim(text));
  std::replace(name.begin(), name.end(), '-', '_');
  std::vector<std::string_view> names;
  for (Enum v : values) {
    if (sched::to_string(v) == name) return v;
    names.push_back(sched::to_string(v));
  }
  if (!extra.empty()) names.push_back(extra);
  const std::string guess = closest_match(name, names);
  fail(option,
       fmt::format("unknown {} \"{}\"; {}expected one of {}", what, trim(text),
                   guess.empty() ? "" : fmt::format("did you mean \"{}\"? ", guess), join(names)));
}

}  // namespace

std::vector<std::string_view> split_list(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == ',') {
      out.push_back(trim(text.substr(start, i - start)));
      start = i + 1;
    }
  }
  return out;
}

std::span<const sched::Algorithm> all_algorithms() {
  return sched::all_algorithms();
}
std::span<const sched::Collective> all_collectives() {
  return sched::all_collectives();
}

std::vector<Bytes> parse_size_list(std::string_view text, const std::string& option) {
  return expand(text, option, "size", [&](std::string_view s) -> std::uint64_t {
    try {
      return parse_size(s);
    } catch (const UnitError& e) {
      fail(option, e.what());
    }
  });
}

std::vector<std::uint32_t> parse_count_list(std::string_view text, const std::string& option,
                                            bool allow_auto) {
  if (allow_auto && trim(text) == "auto") return {kAutoChunks};
  const auto values = expand(text, option, "count", [&](std::string_view s) -> std::uint64_t {
    const auto v = parse_uint(s);
    if (!v) {
      if (!s.empty() && s[0] == '-')
        fail(option, fmt::format("\"{}\" is negative; expected a whole number of at least 1", s));
      fail(option,
           fmt::format("\"{}\" is not a whole number; expected a count such as 8{}", s,
                       allow_auto ? ", a list such as 1,2,4, a range such as 1:64:x2, or auto"
                                  : " or a range such as 1:64:x2"));
    }
    if (*v == 0) fail(option, "a count of 0 was given; expected at least 1");
    if (*v > kMaxChunks)
      fail(option, fmt::format("{} is above the supported maximum of {}", *v, kMaxChunks));
    return *v;
  });
  return {values.begin(), values.end()};
}

sched::Collective parse_collective(std::string_view text, const std::string& option) {
  return parse_name(text, option, "collective", sched::all_collectives());
}

std::vector<sched::Collective> parse_collective_list(std::string_view text,
                                                     const std::string& option) {
  std::vector<sched::Collective> out;
  for (std::string_view item : split_list(text)) out.push_back(parse_collective(item, option));
  return out;
}

sched::DType parse_dtype(std::string_view text, const std::string& option) {
  return parse_name<sched::DType>(text, option, "data type", kDTypes);
}

sched::HostMemory parse_host_memory(std::string_view text, const std::string& option) {
  return parse_name<sched::HostMemory>(text, option, "host memory", kHostMemories);
}

topo::RoutingOptions parse_routing(std::string_view text, const std::string& option) {
  topo::RoutingOptions options;
  const std::string_view name = trim(text);
  if (name == "ecmp") {
    options.ecmp = true;
    return options;
  }
  if (name == "shortest") return options;
  constexpr std::array<std::string_view, 2> kRoutings = {"ecmp", "shortest"};
  const std::string guess = closest_match(name, kRoutings);
  fail(option, fmt::format("unknown routing \"{}\"; {}expected ecmp or shortest", name,
                           guess.empty() ? "" : fmt::format("did you mean \"{}\"? ", guess)));
}

std::vector<sched::DType> parse_dtype_list(std::string_view text, const std::string& option) {
  std::vector<sched::DType> out;
  for (std::string_view item : split_list(text)) out.push_back(parse_dtype(item, option));
  return out;
}

AlgoChoice parse_algo(std::string_view text, const std::string& option) {
  if (trim(text) == "auto") return std::nullopt;
  if (trim(text) == "all")
    fail(option,
         "\"all\" names every algorithm of a sweep or a validation; run simulates one: name it, "
         "or give auto to pick the fastest");
  return parse_name(text, option, "algorithm", sched::all_algorithms(), "auto");
}

std::vector<AlgoChoice> parse_algo_list(std::string_view text, const std::string& option) {
  std::vector<AlgoChoice> out;
  for (std::string_view item : split_list(text)) out.push_back(parse_algo(item, option));
  return out;
}

std::vector<AlgoChoice> parse_sweep_algo_list(std::string_view text, sched::Collective collective,
                                              const std::string& option) {
  // Each item once: nullopt stands for "all", to be expanded once every named one is known.
  std::vector<std::optional<AlgoChoice>> items;
  std::vector<AlgoChoice> named;
  for (std::string_view item : split_list(text)) {
    if (item == "all") {
      items.emplace_back();
      continue;
    }
    named.push_back(parse_algo(item, option));
    items.emplace_back(named.back());
  }
  std::vector<AlgoChoice> out;
  const auto listed = [](const std::vector<AlgoChoice>& v, sched::Algorithm a) {
    return std::find(v.begin(), v.end(), AlgoChoice{a}) != v.end();
  };
  for (const std::optional<AlgoChoice>& item : items) {
    if (item) {
      out.push_back(*item);
      continue;
    }
    for (sched::Algorithm a : all_algorithms())
      if (sched::supports(a, collective) && !listed(named, a) && !listed(out, a)) out.push_back(a);
  }
  return out;
}

std::string to_string(const AlgoChoice& a) {
  return a ? std::string(sched::to_string(*a)) : std::string("auto");
}

std::vector<topo::NodeId> parse_ranks(std::string_view text, const topo::Topology& topology,
                                      const std::string& option) {
  const auto& gpus = topology.gpus();
  if (trim(text).empty()) return gpus;
  std::vector<topo::NodeId> out;
  auto by_index = [&](std::uint64_t i, std::string_view item) {
    if (i >= gpus.size())
      fail(option, fmt::format("GPU index {} in \"{}\" is out of range; the topology has {} GPUs, "
                               "numbered 0 to {}",
                               i, item, gpus.size(), gpus.size() - 1));
    out.push_back(gpus[i]);
  };
  for (std::string_view item : split_list(text)) {
    if (item.empty())
      fail(option,
           fmt::format("empty entry in \"{}\"; write ranks as 0-7,16 or as GPU names", text));
    // A GPU whose name looks like a number or a range is still found by its name first.
    const topo::NodeId named = topology.find(item);
    if (named != topo::kNoNode) {
      if (topology.node(named).kind != topo::NodeKind::gpu)
        fail(option, fmt::format("\"{}\" is a {}, not a GPU", item,
                                 topo::to_string(topology.node(named).kind)));
      out.push_back(named);
      continue;
    }
    if (auto i = parse_uint(item)) {
      by_index(*i, item);
      continue;
    }
    const std::size_t dash = item.find('-');
    if (dash != std::string_view::npos && dash > 0) {
      const auto a = parse_uint(trim(item.substr(0, dash)));
      const auto b = parse_uint(trim(item.substr(dash + 1)));
      if (a && b) {
        if (*a > *b)
          fail(option,
               fmt::format("range \"{}\" starts above its end; write it as {}-{}", item, *b, *a));
        if (*b >= gpus.size()) by_index(*b, item);
        for (std::uint64_t i = *a; i <= *b; ++i) by_index(i, item);
        continue;
      }
    }
    std::vector<std::string> names;
    std::vector<std::string_view> views;
    names.reserve(gpus.size());
    views.reserve(gpus.size());
    for (topo::NodeId g : gpus) names.push_back(topology.node(g).name);
    for (const auto& n : names) views.push_back(n);
    const std::string guess = closest_match(item, views);
    fail(option,
         fmt::format("\"{}\" is neither a GPU index, an index range such as 0-7, nor the name "
                     "of a GPU{}",
                     item, guess.empty() ? "" : fmt::format("; did you mean \"{}\"?", guess)));
  }
  std::vector<topo::NodeId> sorted = out;
  std::sort(sorted.begin(), sorted.end());
  const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  if (dup != sorted.end())
    fail(option, fmt::format("GPU \"{}\" is listed twice; each GPU can hold one rank",
                             topology.node(*dup).name));
  return out;
}

std::string describe_ranks(std::span<const topo::NodeId> ranks, const topo::Topology& topology) {
  // Each rank's GPU index from one table: a search of the GPU list per rank made this header
  // line quadratic, 1.5 s of a 131,072-GPU run.
  constexpr std::size_t kNotGpu = ~std::size_t{0};
  std::vector<std::size_t> gpu_index(topology.num_nodes(), kNotGpu);
  for (std::size_t i = 0; i < topology.gpus().size(); ++i) gpu_index[topology.gpus()[i]] = i;
  std::vector<std::size_t> index;
  index.reserve(ranks.size());
  for (topo::NodeId r : ranks) {
    if (r >= gpu_index.size() || gpu_index[r] == kNotGpu) return "?";
    index.push_back(gpu_index[r]);
  }
  std::string out;
  for (std::size_t i = 0; i < index.size();) {
    std::size_t j = i;
    while (j + 1 < index.size() && index[j + 1] == index[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", index[i]) : fmt::format("{}-{}", index[i], index[j]);
    i = j + 1;
  }
  return out;
}

std::string closest_match(std::string_view found, std::span<const std::string_view> candidates) {
  // Edit distance counting a swap of neighbours as one edit ("rign" -> "ring"); a candidate
  // counts when at most a third of the word differs.
  auto distance = [](std::string_view a, std::string_view b) {
    auto lower = [](char c) {
      return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    };
    std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
      for (std::size_t j = 1; j <= b.size(); ++j) {
        const std::size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
        d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
        if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
            lower(a[i - 2]) == lower(b[j - 1]))
          d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
    return d[a.size()][b.size()];
  };
  std::string best;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  for (std::string_view c : candidates) {
    const std::size_t d = distance(found, c);
    const std::size_t allowed = std::max<std::size_t>(1, std::max(found.size(), c.size()) / 3);
    if (d <= allowed && d < best_distance) {
      best = std::string(c);
      best_distance = d;
    }
  }
  return best;
}

}  // namespace collsim::cli
