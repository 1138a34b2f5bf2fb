#include "schedules/closed_form.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "schedules/algorithms.hpp"
#include "topology/error.hpp"

namespace collsim::sched {

namespace {

// Ring reduce-scatter phase followed (or not) by an allgather phase, N = (p-1)k pieces each.
// The send stream is a line of transfers T, the reduce stream a line of reductions G, and the
// reduction of piece i feeds the transfer of piece i + k (docs/algorithms.md, "two lines").
double ring_allreduce(double T, double G, RankId p, std::uint32_t k) {
  const double N = double(p - 1) * k;
  if (k == 1) return (p - 1) * (2 * T + G);
  return std::max(2 * N * T, (N - k + 2) * T + N * G);
}

double ring_reduce_scatter(double T, double G, RankId p, std::uint32_t k) {
  const double N = double(p - 1) * k;
  if (k == 1) return N * (T + G);
  return std::max(N * T + G, T + N * G);
}

// Two-stage flow shop of k identical jobs: first stage a, second stage c.
double flow_shop2(double a, double c, std::uint32_t k) {
  return a + c + (k - 1) * std::max(a, c);
}

// Longest path through one heap-shaped tree of p nodes, k chunks: up from a leaf x to the root
// (a transfer T per edge, then the parent's reductions: both of them when x's side is the left
// child, the second only when it is the right one), then, if `down`, down to the deepest leaf
// (a transfer per edge). The k - 1 further chunks pass the slowest stage on the path, whose
// period is T or the parent's reductions per chunk (docs/algorithms.md, "trees").
double heap_tree(double T, double G, RankId p, std::uint32_t k, bool down) {
  auto depth = [](RankId i) {
    RankId d = 0;
    for (++i; i > 1; i >>= 1) ++d;
    return d;
  };
  const double down_path = down ? depth(p - 1) * T : 0;
  double best = 0;
  for (RankId x = p / 2; x < p; ++x) {  // the leaves
    double sum = 0, period = T;
    for (RankId i = x; i > 0;) {
      const RankId q = (i - 1) / 2;
      const double children = double(2 * q + 1 < p) + double(2 * q + 2 < p);
      sum += T + (i == 2 * q + 1 ? children * G : G);
      period = std::max(period, children * G);
      i = q;
    }
    best = std::max(best, sum + (k - 1) * period + down_path);
  }
  return best;
}

// rd and rhd, evaluated step by step over the p' core ranks (docs/algorithms.md, "doubling").
// Each core rank has a line of sends, a line of receives and a line of reductions; chunk c of a
// step waits for chunk c of the previous step. With r extra ranks the hand-over (transfers T0,
// then reductions G0 on the receiving rank's reduction line) feeds step 0 of ranks 0..r-1 and
// the send-back follows their last step. A recurrence rather than one expression because, when
// p is not a power of two, ranks with and without an extra partner run out of step.
struct PipeStep {
  double T = 0, G = 0;
  bool reduce = false;
  RankId bit = 0;  // partner = j xor bit
};

double doubling_pipeline(const std::vector<PipeStep>& steps, RankId q, RankId extra,
                         std::uint32_t k, double T0, double G0) {
  std::vector<std::vector<double>> data(q, std::vector<double>(k, 0.0));
  std::vector<double> send(q, 0), recv(q, 0), red(q, 0), got(q, 0);
  for (RankId j = 0; j < extra; ++j)
    for (std::uint32_t c = 0; c < k; ++c) {
      red[j] = std::max((c + 1) * T0, red[j]) + G0;
      data[j][c] = red[j];
    }
  for (const PipeStep& s : steps) {
    for (std::uint32_t c = 0; c < k; ++c) {
      for (RankId j = 0; j < q; ++j) {
        const RankId to = j ^ s.bit;
        const double end = std::max({send[j], data[j][c], recv[to]}) + s.T;
        send[j] = end;
        got[to] = end;
      }
      for (RankId j = 0; j < q; ++j) {
        recv[j] = got[j];
        if (s.reduce) {
          red[j] = std::max(got[j], red[j]) + s.G;
          data[j][c] = red[j];
        } else {
          data[j][c] = std::max(data[j][c], got[j]);
        }
      }
    }
  }
  double end = 0;
  for (RankId j = 0; j < q; ++j) end = std::max({end, send[j], red[j]});
  for (RankId j = 0; j < extra; ++j) {
    double back = 0;
    for (std::uint32_t c = 0; c < k; ++c) back = std::max(back, data[j][c]) + T0;
    end = std::max(end, back);
  }
  return end;
}

double doubling(const UniformCosts& u, RankId p, std::uint32_t k, double chunk, bool halving) {
  RankId q = 1;
  std::uint32_t L = 0;
  while (q * 2 <= p) q *= 2, ++L;
  std::vector<PipeStep> steps;
  if (!halving) {
    for (std::uint32_t s = 0; s < L; ++s)
      steps.push_back({u.transfer(chunk), u.reduce(chunk), true, RankId{1} << s});
  } else {
    for (std::uint32_t s = 0; s < L; ++s) {
      const double m = chunk / double(RankId{2} << s);
      steps.push_back({u.transfer(m), u.reduce(m), true, q >> (s + 1)});
    }
    for (std::uint32_t s = L; s-- > 0;)
      steps.push_back({u.transfer(chunk / double(RankId{2} << s)), 0, false, q >> (s + 1)});
  }
  return doubling_pipeline(steps, q, p - q, k, u.transfer(chunk), u.reduce(chunk));
}

}  // namespace

double closed_form(const PlanRequest& req, RankId p, const UniformCosts& u) {
  if (auto why = why_not(req, p); !why.empty())
    throw InputError("", "--algo " + std::string(to_string(req.algorithm)), why);
  const double n = double(req.size);
  const std::uint32_t k = req.chunks;
  if (p == 1) {
    const double bytes =
        (req.collective == Collective::reduce_scatter || req.collective == Collective::allgather)
            ? n / p
            : n;
    // k copies one after another on one stream.
    return k * u.device_copy(bytes / k);
  }
  const double piece = n / (double(p) * k);  // a segment's chunk
  const double chunk = n / k;                // a chunk of the whole buffer
  switch (req.algorithm) {
    case Algorithm::ring:
      switch (req.collective) {
        case Collective::allreduce:
          return ring_allreduce(u.transfer(piece), u.reduce(piece), p, k);
        case Collective::reduce_scatter:
          return ring_reduce_scatter(u.transfer(piece), u.reduce(piece), p, k);
        case Collective::allgather:
          return std::max(double(p - 1) * k * u.transfer(piece), u.device_copy(n / p));
        case Collective::broadcast:
          return std::max((p + k - 2) * u.transfer(chunk), u.device_copy(n));
        case Collective::reduce: {
          const double T = u.transfer(chunk), G = u.reduce(chunk);
          return (p - 1) * (T + G) + (k - 1) * std::max(T, G);
        }
        case Collective::alltoall:
          break;
      }
      break;
    case Algorithm::direct:
      switch (req.collective) {
        case Collective::allreduce:
        case Collective::reduce:
          return flow_shop2(u.transfer(chunk), (p - 1) * u.reduce(chunk), k);
        case Collective::reduce_scatter:
          return flow_shop2(u.transfer(piece), (p - 1) * u.reduce(piece), k);
        case Collective::allgather:
        case Collective::alltoall:
          return std::max(k * u.transfer(piece), u.device_copy(n / p));
        case Collective::broadcast:
          return std::max(k * u.transfer(chunk), u.device_copy(n));
      }
      break;
    case Algorithm::pairwise:
      // One transfer at a time each way: the (p - 1) k transfers in a row, beside the copy, or
      // each followed by its reduction (fact 1 with two stages).
      switch (req.collective) {
        case Collective::reduce_scatter:
          return flow_shop2(u.transfer(piece), u.reduce(piece), (p - 1) * k);
        case Collective::allgather:
        case Collective::alltoall:
          return std::max((p - 1) * k * u.transfer(piece), u.device_copy(n / p));
        default:
          break;
      }
      break;
    case Algorithm::tree:
      switch (req.collective) {
        case Collective::allreduce: {
          const double trees = double(detail::double_binary_tree(p).size());
          const double m = n / (trees * k);
          return heap_tree(u.transfer(m), u.reduce(m), p, k, true);
        }
        case Collective::reduce:
          return heap_tree(u.transfer(chunk), u.reduce(chunk), p, k, false);
        case Collective::broadcast:
          return std::max(heap_tree(u.transfer(chunk), 0, p, k, false), u.device_copy(n));
        default:
          break;
      }
      break;
    case Algorithm::rd:
    case Algorithm::rhd:
      if (req.collective == Collective::allreduce)
        return doubling(u, p, k, chunk, req.algorithm == Algorithm::rhd);
      break;
    case Algorithm::naive: {
      const double T = u.transfer(n), G = u.reduce(n);
      switch (req.collective) {
        case Collective::allreduce:
          return (p - 1) * (2 * T + G);
        case Collective::reduce:
          return (p - 1) * (T + G);
        case Collective::broadcast:
          return (p - 1) * T + u.device_copy(n);
        default:
          break;
      }
      break;
    }
    case Algorithm::hier:
      throw InputError("", "--algo hier",
                       "the hierarchical closed form depends on the servers; use closed_form_hier");
    default:
      break;
  }
  throw InputError("", "--algo " + std::string(to_string(req.algorithm)),
                   "no closed form for " + std::string(to_string(req.algorithm)) + " " +
                       std::string(to_string(req.collective)) + " yet (not implemented)");
}

double closed_form_hier(const PlanRequest& req, RankId servers, RankId gpus,
                        const UniformCosts& intra, const UniformCosts& inter) {
  if (req.algorithm != Algorithm::hier || req.collective != Collective::allreduce)
    throw InputError("", "--algo", "closed_form_hier describes hier allreduce only");
  if (auto why = why_not(req, servers * gpus); !why.empty())
    throw InputError("", "--algo hier", why);
  const double n = double(req.size);
  const std::uint32_t k = req.chunks;
  if (servers * gpus == 1) return k * intra.device_copy(n / k);
  double t = 0;
  const double m1 = n / (double(gpus) * k);  // a GPU's segment of a chunk
  if (gpus > 1) {
    t += ring_reduce_scatter(intra.transfer(m1), intra.reduce(m1), gpus, k);
    t += double(gpus - 1) * k * intra.transfer(m1);  // the allgather
  }
  if (servers > 1) {
    const double m2 = m1 / servers;
    t += ring_allreduce(inter.transfer(m2), inter.reduce(m2), servers, k);
  }
  return t;
}

}  // namespace collsim::sched
