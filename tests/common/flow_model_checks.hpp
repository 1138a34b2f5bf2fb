#pragma once
// Replays arrivals, withdrawals, completions, capacity changes and the passing of time on flow
// models set up in different ways, and lists where they part from each other or from max-min
// fairness. At every point where rates hold (after each change, or after each flush when
// arrivals and departures are deferred to the end of their instant, as the engine runs them):
// - the model as the engine runs it (the defaults) and one without reservations, with the heap
//   from the first set past its scan rounds and reporting what it loads must agree to the bit:
//   rates, completion times, and every resource's bytes and busy time;
// - the rates of the default model, of one that re-shares whole components, and (deferred) of
//   one that re-shares every instant by regions must be the max-min fair ones computed from
//   scratch (max_min_reference.hpp) to 1e-9 relative, the margin the model's own checks allow;
// - no resource carries more than its capacity, a stalled flow never completes, a running one
//   completes no earlier than now, and a flow completes when its rates, integrated over time,
//   have drained its bytes;
// - every flow whose completion time changed, or that started, was rescheduled, and every
//   limited resource whose load changed was reported to observers (FlowModel::touched());
// - each resource's bytes are those of the flows that left it (their bytes if completed, the
//   rates integrated over time if withdrawn), and its busy time the time some flow was on it.
// Tied links are untied now and then (FlowModel::split_tied), as the engine does when a new
// route separates two links that every route before crossed together.
// Without Catch2: the choices come from a fuzzer's input (tests/fuzz/fuzz_flow_model.cpp) or
// from a fixed sequence (tests/sim/flow_model_checks_test.cpp).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/flow_model.hpp"
#include "tests/common/choices.hpp"
#include "tests/common/max_min_reference.hpp"
#include "tests/common/run_differences.hpp"

namespace collsim::test {

class FlowModelReplay {
 public:
  explicit FlowModelReplay(Choices& choose) : choose_(choose) {}

  // Runs up to `max_steps` changes (or until the choices run out, or the checks have cost about
  // kMaxWork steps of the reference's scans); the differences found, in order, the replay
  // stopping at the first point that has any.
  std::vector<std::string> run(std::size_t max_steps) {
    set_up();
    for (step_ = 0; step_ < max_steps && !choose_.exhausted() && out_.empty() && work_ < kMaxWork;
         ++step_) {
      switch (choose_.below(10)) {
        case 0:
        case 1:
        case 2:
          start();
          break;
        case 3:
          withdraw();
          break;
        case 4:
        case 5:
          complete_next();
          break;
        case 6:
          change_capacity();
          break;
        case 7:
          advance(kSteps[choose_.below(kSteps.size())] * (1 + choose_.below(4)));
          break;
        case 8:
          split();
          break;
        default:
          if (!deferred_ || !sync()) break;  // the end of an instant with no time passing
          if (choose_.below(8) == 0) {
            // As the engine does once copies may queue for copy engines: every change from now
            // on is re-shared as it comes.
            script_.push_back(fmt::format("t = {}: changes are no longer deferred", now_));
            for (sim::FlowModel* m : models()) m->set_deferred(false);
            deferred_ = false;
          }
          break;
      }
      if (!deferred_) sync();
    }
    if (out_.empty()) sync();
    return out_;
  }

  const sim::SharingStats& stats() const { return main_.stats(); }
  // What the replay did, one line per change, to reproduce a difference by hand.
  const std::vector<std::string>& script() const { return script_; }

 private:
  static constexpr double kTolerance = 1e-9;
  // A fuzzer's input must take well under a second under the sanitizers: the reference's scans
  // over 400 resources after each of thousands of changes took 20 s.
  static constexpr std::uint64_t kMaxWork = 20'000'000;
  static constexpr std::array<double, 5> kSteps{0.0, 1e-6, 1e-4, 1e-2, 1.0};
  static constexpr std::array<double, 6> kWeights{1.0, 1.0, 2.0, 3.0, 0.5, 1.5};

  // The models, in the order named in the messages.
  std::array<sim::FlowModel*, 4> models() { return {&main_, &exact_, &components_, &regions_}; }
  static constexpr std::array<const char*, 4> kNames{"the default model", "the exact variant",
                                                     "the component model", "the region model"};
  // The models checked against max-min from scratch (the exact variant is checked against the
  // default model, to the bit).
  static constexpr std::array<std::size_t, 3> kAgainstScratch{0, 2, 3};

  double pick_capacity(bool may_fail) {
    if (choose_.below(10) == 0) return kUnlimited;
    if (may_fail && choose_.below(8) == 0) return 0.0;
    // Few distinct capacities make ties and long cascades; any make distinct levels.
    return few_values_ ? 10.0 * (1 + choose_.below(3)) : 1.0 + choose_.below(1000);
  }

  void set_up() {
    deferred_ = choose_.below(2) == 1;
    few_values_ = choose_.below(2) == 1;
    // Mostly a small fabric; now and then one large enough for sets past the heap's threshold.
    ordinary_ = choose_.below(8) == 0 ? 200 + choose_.below(200) : 1 + choose_.below(24);
    // Then a few links tied to others until split() unties them (sim/tied_links.hpp): no flow
    // names them before, and each has at least the capacity of the one it leaves.
    const std::size_t resources = ordinary_ + choose_.below(4);
    capacity_.resize(resources);
    for (double& c : capacity_) c = pick_capacity(false);
    for (std::size_t r = ordinary_; r < resources; ++r) capacity_[r] = 1000.0 + choose_.below(2);
    for (sim::FlowModel* m : models()) {
      m->reset(capacity_);
      m->set_deferred(deferred_);
    }
    exact_.reserve_alone(false);
    exact_.heap_above(0);
    exact_.report_touched(true);
    components_.local_regions(false);
    regions_.whole_instant_below(0);
    script_.push_back(fmt::format("{} resources, capacities {}{}", resources,
                                  fmt::join(capacity_, " "), deferred_ ? ", deferred" : ""));
    expected_bytes_.assign(resources, 0.0);
    present_.assign(resources, 0);
    busy_since_.assign(resources, 0.0);
    busy_total_.assign(resources, 0.0);
    split_.assign(resources, false);
    touched_.assign(resources, false);
    load_.assign(resources, 0.0);
  }

  std::string where() const {
    return fmt::format("step {} at t = {}{}", step_, now_, deferred_ ? " (deferred)" : "");
  }

  // Distinct resources of flow f, each once.
  std::vector<sim::ResourceId> distinct(sim::FlowId f) const {
    std::vector<sim::ResourceId> rs;
    for (const auto& use : uses_[f]) rs.push_back(use.first);
    std::sort(rs.begin(), rs.end());
    rs.erase(std::unique(rs.begin(), rs.end()), rs.end());
    return rs;
  }

  // After every call: what the default model rescheduled and what the exact variant, which
  // reports them, says it loaded.
  void note_rescheduled() {
    for (sim::FlowId f : main_.rescheduled())
      if (f < told_.size()) told_[f] = true;
    for (sim::ResourceId r : exact_.touched()) touched_[r] = true;
  }

  void start() {
    sim::FlowId f = 0;
    for (std::size_t i = 0; i < models().size(); ++i) {
      const sim::FlowId id = models()[i]->create();
      if (i == 0) f = id;
      if (id != f) {
        out_.push_back(
            fmt::format("{}: {} created flow {}, the default model {}", where(), kNames[i], id, f));
        return;
      }
    }
    if (f >= uses_.size()) {
      uses_.resize(f + 1);
      active_.resize(f + 1, false);
      bytes_.resize(f + 1, 0.0);
      drained_.resize(f + 1, 0.0);
      told_.resize(f + 1, false);
      started_.resize(f + 1, false);
      finish_.resize(f + 1, kUnlimited);
    }
    uses_[f].clear();
    const std::uint32_t n = 1 + choose_.below(8);  // past the six a flow record holds
    for (std::uint32_t i = 0; i < n; ++i) {
      const auto r = static_cast<sim::ResourceId>(choose_.below(ordinary_));
      const double w = kWeights[choose_.below(kWeights.size())];
      uses_[f].emplace_back(r, w);
      for (sim::FlowModel* m : models()) m->add_use(f, r, w);
    }
    const double bytes = choose_.below(16) == 0 ? 0.0 : 1e3 * (1 + choose_.below(1000));
    for (sim::FlowModel* m : models()) m->start(f, bytes, now_);
    note_rescheduled();
    std::string list;
    for (const auto& [r, w] : uses_[f]) list += fmt::format(" {}x{}", r, w);
    script_.push_back(fmt::format("t = {}: flow {} of {} bytes starts on{}", now_, f, bytes, list));
    if (bytes == 0) {
      // Done as it starts: the engine ends it in the same instant, and no resource sees it.
      if (!(main_.finish_time(f) == now_))
        out_.push_back(fmt::format("{}: flow {} of no bytes finishes at {}", where(), f,
                                   main_.finish_time(f)));
      for (sim::FlowModel* m : models()) m->release(f, now_, true);
      note_rescheduled();
      return;
    }
    active_[f] = true;
    started_[f] = true;
    bytes_[f] = bytes;
    drained_[f] = 0;
    for (sim::ResourceId r : distinct(f))
      if (present_[r]++ == 0) busy_since_[r] = now_;
  }

  // Flow f leaves every model at now_: all its bytes drained if completed, else what its rates
  // drained until now.
  void leave(sim::FlowId f, bool completed) {
    script_.push_back(
        fmt::format("t = {}: flow {} {}", now_, f, completed ? "completes" : "is withdrawn"));
    for (sim::FlowModel* m : models()) m->release(f, now_, completed);
    note_rescheduled();
    const double drained = completed ? bytes_[f] : drained_[f];
    for (const auto& [r, w] : uses_[f]) expected_bytes_[r] += drained * w;
    for (sim::ResourceId r : distinct(f))
      if (--present_[r] == 0) busy_total_[r] += now_ - busy_since_[r];
    active_[f] = false;
    started_[f] = false;
  }

  std::vector<sim::FlowId> running() const {
    std::vector<sim::FlowId> ids;
    for (sim::FlowId f = 0; f < active_.size(); ++f)
      if (active_[f]) ids.push_back(f);
    return ids;
  }

  void withdraw() {
    const std::vector<sim::FlowId> ids = running();
    if (ids.empty()) return;
    leave(ids[choose_.below(ids.size())], false);
  }

  // Time moves on to t, the rates of the instant before holding until then.
  void advance(double dt) {
    if (dt <= 0) return;
    if (!sync()) return;
    // Flows that finish first end at their time, as the engine's completions would.
    for (;;) {
      const double t = earliest_finish();
      if (!(t <= now_ + dt)) break;
      const double left = now_ + dt - t;
      complete_at(t);
      if (!out_.empty()) return;
      dt = left;
      if (!sync()) return;
    }
    move_to(now_ + dt);
  }

  double earliest_finish() const {
    double t = kUnlimited;
    for (sim::FlowId f : running()) t = std::min(t, main_.finish_time(f));
    return t;
  }

  void move_to(double t) {
    for (sim::FlowId f : running()) {
      const double rate = main_.rate(f);
      if (rate < kUnlimited) drained_[f] += rate * (t - now_);
    }
    now_ = t;
  }

  void complete_at(double t) {
    if (t < now_) {
      out_.push_back(fmt::format("{}: a flow finishes at {}, in the past", where(), t));
      return;
    }
    move_to(t);
    for (sim::FlowId f : running()) {
      if (main_.finish_time(f) != t) continue;
      // A flow ends when its rates, integrated over time, have drained its bytes (one that
      // crosses no limited resource drains them at once).
      if (main_.rate(f) < kUnlimited && !close_bytes(drained_[f], bytes_[f]))
        out_.push_back(fmt::format("{}: flow {} of {} bytes completes having drained {}", where(),
                                   f, bytes_[f], drained_[f]));
      leave(f, true);
    }
  }

  void complete_next() {
    if (!sync()) return;
    const double t = earliest_finish();
    if (t < kUnlimited) complete_at(t);
  }

  void change_capacity() {
    if (!sync()) return;  // the engine flushes the instant's arrivals and departures first
    auto r = static_cast<sim::ResourceId>(choose_.below(capacity_.size()));
    if (r >= ordinary_ && !split_[r]) r = static_cast<sim::ResourceId>(choose_.below(ordinary_));
    capacity_[r] = pick_capacity(true);
    script_.push_back(fmt::format("t = {}: resource {} gets capacity {}", now_, r, capacity_[r]));
    for (sim::FlowModel* m : models()) m->set_capacity(r, capacity_[r], now_);
    note_rescheduled();
  }

  // A tied link becomes a resource of its own, with the flows, bytes and busy time of the one it
  // was tied to; no rate changes. (An observer unties every link, so no split is reported.)
  void split() {
    std::vector<sim::ResourceId> spare;
    for (std::size_t r = ordinary_; r < capacity_.size(); ++r)
      if (!split_[r]) spare.push_back(static_cast<sim::ResourceId>(r));
    if (spare.empty()) return;
    const sim::ResourceId tied = spare[choose_.below(spare.size())];
    const auto from = static_cast<sim::ResourceId>(choose_.below(ordinary_));
    if (capacity_[from] > capacity_[tied]) return;
    script_.push_back(fmt::format("t = {}: link {} is untied from {}", now_, tied, from));
    for (sim::FlowModel* m : models()) m->split_tied(from, tied);
    split_[tied] = true;
    for (sim::FlowId f : running()) {
      const std::size_t n = uses_[f].size();
      for (std::size_t u = 0; u < n; ++u)
        if (uses_[f][u].first == from) uses_[f].emplace_back(tied, uses_[f][u].second);
    }
    expected_bytes_[tied] = expected_bytes_[from];
    present_[tied] = present_[from];
    busy_since_[tied] = busy_since_[from];
    busy_total_[tied] = busy_total_[from];
    touched_[tied] = true;
  }

  static bool close(double a, double b) {
    if (a == b) return true;
    if (!(a < kUnlimited) || !(b < kUnlimited)) return false;
    return std::abs(a - b) <= kTolerance * std::max(std::abs(a), std::abs(b)) + 1e-12;
  }
  // Bytes summed along different paths: within 1e-9, or a millionth of a byte near zero.
  static bool close_bytes(double a, double b) { return close(a, b) || std::abs(a - b) <= 1e-6; }

  // Flushes the instant and checks every property; false once anything differs.
  bool sync() {
    if (!out_.empty()) return false;
    if (deferred_) {
      script_.push_back(fmt::format("t = {}: flush", now_));
      for (sim::FlowModel* m : models()) m->flush(now_);
      note_rescheduled();
    }
    const std::vector<sim::FlowId> ids = running();
    // The reference scans every resource once per level it freezes, and there are at most as
    // many levels as running flows.
    work_ += capacity_.size() * (std::min(capacity_.size(), ids.size()) + 1);
    const std::vector<double> expected = max_min_rates(capacity_, uses_, active_);
    for (sim::FlowId f : ids) {
      const double rate = main_.rate(f);
      const double finish = main_.finish_time(f);
      if (!same_double(exact_.rate(f), rate) || !same_double(exact_.finish_time(f), finish))
        out_.push_back(
            fmt::format("{}: flow {} runs at {} until {} in the exact variant, at {} "
                        "until {} in the default model",
                        where(), f, exact_.rate(f), exact_.finish_time(f), rate, finish));
      for (const std::size_t i : kAgainstScratch) {
        if (models()[i] == &regions_ && !deferred_) continue;  // the default model's twin
        const double x = models()[i]->rate(f);
        if (!close(x, expected[f]))
          out_.push_back(fmt::format("{}: flow {} runs at {} in {}, at {} by max-min from scratch",
                                     where(), f, x, kNames[i], expected[f]));
      }
      if (rate == 0 && finish < kUnlimited)
        out_.push_back(
            fmt::format("{}: flow {} is stalled but finishes at {}", where(), f, finish));
      if (rate > 0 && finish < now_)
        out_.push_back(fmt::format("{}: flow {} finishes at {}, in the past", where(), f, finish));
      if ((started_[f] || !same_double(finish, finish_[f])) && !told_[f])
        out_.push_back(fmt::format("{}: flow {} {} but was not rescheduled", where(), f,
                                   started_[f] ? "started" : "moved its completion"));
      finish_[f] = finish;
      told_[f] = false;
      started_[f] = false;
    }
    for (sim::ResourceId r = 0; r < capacity_.size(); ++r) {
      if (main_.load(r) > capacity_[r] * (1 + kTolerance) + 1e-12)
        out_.push_back(fmt::format("{}: resource {} carries {} of its {}", where(), r,
                                   main_.load(r), capacity_[r]));
      if (!same_double(exact_.bytes(r), main_.bytes(r)) ||
          !same_double(exact_.busy_time(r, now_), main_.busy_time(r, now_)))
        out_.push_back(
            fmt::format("{}: resource {} drained {} bytes and was busy {} s in the "
                        "exact variant, {} and {} in the default model",
                        where(), r, exact_.bytes(r), exact_.busy_time(r, now_), main_.bytes(r),
                        main_.busy_time(r, now_)));
      if (!close_bytes(main_.bytes(r), expected_bytes_[r]))
        out_.push_back(fmt::format("{}: resource {} drained {} bytes, its flows {}", where(), r,
                                   main_.bytes(r), expected_bytes_[r]));
      const double busy = busy_total_[r] + (present_[r] > 0 ? now_ - busy_since_[r] : 0.0);
      if (!close(main_.busy_time(r, now_), busy))
        out_.push_back(fmt::format("{}: resource {} was busy {} s, its flows {} s", where(), r,
                                   main_.busy_time(r, now_), busy));
      // Observers are told of every limited resource whose load changed (a reordered sum may
      // move in its last bits without a change: those are told anyway).
      const double load = exact_.load(r);
      if (capacity_[r] < kUnlimited && !touched_[r] && load != load_[r] &&
          std::abs(load - load_[r]) > 1e-12 * std::max(load, load_[r]))
        out_.push_back(fmt::format("{}: resource {} went from a load of {} to {} untold", where(),
                                   r, load_[r], load));
      load_[r] = load;
      touched_[r] = false;
    }
    return out_.empty();
  }

  Choices& choose_;
  sim::FlowModel main_, exact_, components_, regions_;
  bool deferred_ = false;
  bool few_values_ = false;
  std::size_t step_ = 0;
  std::uint64_t work_ = 0;
  double now_ = 0;
  std::vector<double> capacity_;
  std::vector<FlowUses> uses_;          // by flow id
  std::vector<bool> active_;            // started with bytes to drain, not released
  std::vector<double> bytes_;           // what each flow set out to drain
  std::vector<double> drained_;         // its rates in the default model, integrated over time
  std::vector<bool> told_;              // rescheduled since the last check
  std::vector<bool> started_;           // started since the last check
  std::vector<double> finish_;          // its completion time at the last check
  std::vector<double> expected_bytes_;  // by resource
  std::vector<std::uint32_t> present_;  // flows with bytes on it, by resource
  std::vector<double> busy_since_;
  std::vector<double> busy_total_;
  std::size_t ordinary_ = 0;   // resources that flows pick; the rest are tied links
  std::vector<bool> split_;    // a tied link untied, by resource
  std::vector<bool> touched_;  // told of since the last check, by resource
  std::vector<double> load_;   // its load at the last check, by resource
  std::vector<std::string> out_;
  std::vector<std::string> script_;
};

}  // namespace collsim::test
