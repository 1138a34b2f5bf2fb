#include "cuda_backend/executor.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "cuda_backend/cuda_executor.hpp"
#include "cuda_backend/host_executor.hpp"
#include "topology/error.hpp"

namespace collsim::backend {

double RunResult::median() const {
  if (seconds.empty()) return 0;
  std::vector<double> s = seconds;
  std::sort(s.begin(), s.end());
  const std::size_t m = s.size() / 2;
  return s.size() % 2 ? s[m] : 0.5 * (s[m - 1] + s[m]);
}

double RunResult::min() const {
  return seconds.empty() ? 0 : *std::min_element(seconds.begin(), seconds.end());
}

std::unique_ptr<Executor> make_executor(std::string_view backend) {
  if (backend == "host") return std::make_unique<HostExecutor>();
  if (backend == "cuda") return make_cuda_executor();
  throw InputError("", "--backend",
                   fmt::format("unknown backend '{}'; expected 'cuda' or 'host'", backend));
}

std::vector<SyntheticLink> uniform_links(std::uint32_t ranks, SyntheticLink link) {
  std::vector<SyntheticLink> links(std::size_t{ranks} * ranks, link);
  for (std::uint32_t r = 0; r < ranks; ++r) links[std::size_t{r} * ranks + r] = SyntheticLink{};
  return links;
}

}  // namespace collsim::backend
