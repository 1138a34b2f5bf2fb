// Tied links (sim/tied_links.hpp): classes of links crossed by the same routes, and a flow model
// that holds one link per class gives the rates, bytes and busy times of one that holds them all.
#include "sim/tied_links.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "sim/flow_model.hpp"
#include "tests/common/lcg.hpp"

using namespace collsim;
using namespace collsim::sim;

namespace {

using Rng = test::Lcg;

using Route = std::vector<ResourceId>;

// 1 to `most` distinct links out of `links`.
Route random_route(Rng& next, std::size_t links, std::size_t most) {
  Route route;
  const std::size_t k = std::min(links, 1 + next(most));
  while (route.size() < k) {
    const auto l = static_cast<ResourceId>(next(links));
    if (std::find(route.begin(), route.end(), l) == route.end()) route.push_back(l);
  }
  return route;
}

}  // namespace

TEST_CASE("tied links are the classes of links crossed by the same routes", "[sim][tied]") {
  // After every route, brute force: two links share a representative exactly when the same
  // routes cross them (and neither is pinned), the representative is the class's link of least
  // capacity (then lowest id), and the representatives new since the last route are the splits
  // reported, each split off the class of the representative it names.
  Rng next{2026};
  for (int trial = 0; trial < 60; ++trial) {
    const std::size_t links = 4 + next(20);
    std::vector<double> cap(links + 3);  // three resources no route crosses (memory, say)
    for (auto& c : cap) c = next(5) == 0 ? kUnlimited : static_cast<double>(1 + next(4));
    TiedLinks tied;
    tied.reset(cap);
    std::set<ResourceId> pinned;
    for (ResourceId l = 0; l < links; ++l)
      if (next(8) == 0) {
        tied.pin(l);
        pinned.insert(l);
      }
    std::vector<std::set<std::size_t>> crossed_by(cap.size());
    std::set<ResourceId> reps_before;
    for (std::size_t i = 0; i < 12; ++i) {
      const Route route = random_route(next, links, 5);
      tied.add_route(route.data(), route.data() + route.size());
      for (ResourceId l : route) crossed_by[l].insert(i);
      INFO("trial " << trial << " route " << i);
      std::set<ResourceId> reps;
      for (ResourceId a = 0; a < cap.size(); ++a) {
        const ResourceId rep = tied.representative(a);
        CHECK(tied.is_representative(a) == (rep == a));
        if (rep == a) reps.insert(a);
        for (ResourceId b = 0; b < cap.size(); ++b) {
          const bool same = a == b || (!crossed_by[a].empty() && crossed_by[a] == crossed_by[b] &&
                                       !pinned.contains(a) && !pinned.contains(b));
          CHECK((tied.representative(b) == rep) == same);
          if (same && (cap[b] < cap[rep] || (cap[b] == cap[rep] && b < rep))) FAIL("not least");
        }
      }
      // Representatives of links seen before this route: those new are the splits.
      std::set<ResourceId> expected_new;
      for (ResourceId r : reps)
        if (!reps_before.contains(r) && crossed_by[r].size() > crossed_by[r].count(i))
          expected_new.insert(r);
      std::set<ResourceId> reported;
      for (const TiedLinks::Split& s : tied.take_splits()) {
        reported.insert(s.tied);
        CHECK(reps_before.contains(s.from));
        CHECK(reps.contains(s.from));
        // Crossed by the same routes as `from` until this one.
        std::set<std::size_t> a = crossed_by[s.tied], b = crossed_by[s.from];
        a.erase(i);
        b.erase(i);
        CHECK(a == b);
      }
      CHECK(reported == expected_new);
      reps_before = reps;
    }
  }
}

TEST_CASE("a flow model holding one link per class matches one holding every link", "[sim][tied]") {
  // Two models see the same arrivals, departures and flows waiting to start, on routes that
  // appear during the run: one holds every link of each route, the other only the
  // representatives, untying links with split_tied as new routes split classes, with flows
  // running and waiting on them. Every rate must agree after every step, and every link's bytes
  // and busy time must be its representative's.
  Rng next{77};
  std::uint64_t splits = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const std::size_t links = 3 + next(10);
    std::vector<double> cap(links);
    for (auto& c : cap) c = next(6) == 0 ? kUnlimited : 1.0 + static_cast<double>(next(8));
    FlowModel all;
    FlowModel one;
    all.reset(cap);
    one.reset(cap);
    one.set_deferred(next(2) == 0);
    all.set_deferred(false);
    TiedLinks tied;
    tied.reset(cap);
    std::vector<Route> routes;
    std::map<FlowId, std::size_t> route_of;  // flows created in both models, by `all`'s id
    std::map<FlowId, FlowId> twin;           // `all`'s id -> `one`'s id
    std::set<FlowId> waiting;                // created, not started
    double now = 0;
    for (int step = 0; step < 150; ++step) {
      now += 0.001 * static_cast<double>(1 + next(3));
      const auto op = next(10);
      if (op < 2 || routes.empty()) {
        routes.push_back(random_route(next, links, 4));
        tied.add_route(routes.back().data(), routes.back().data() + routes.back().size());
        for (const TiedLinks::Split& s : tied.take_splits()) {
          one.split_tied(s.from, s.tied);
          ++splits;
        }
        continue;
      }
      if (op < 6) {
        const std::size_t i = next(routes.size());
        const FlowId a = all.create();
        const FlowId b = one.create();
        for (ResourceId l : routes[i]) {
          all.add_use(a, l, 1.0);
          if (tied.is_representative(l)) one.add_use(b, l, 1.0);
        }
        route_of[a] = i;
        twin[a] = b;
        waiting.insert(a);
        if (next(3) == 0) continue;  // starts in a later step
      }
      if (op < 8 && !waiting.empty()) {
        auto it = waiting.begin();
        std::advance(it, next(waiting.size()));
        const double bytes = 1.0 + static_cast<double>(next(50));
        all.start(*it, bytes, now);
        one.start(twin[*it], bytes, now);
        waiting.erase(it);
      } else {
        std::vector<FlowId> running;
        for (const auto& [a, b] : twin)
          if (!waiting.contains(a)) running.push_back(a);
        if (running.empty()) continue;
        const FlowId a = running[next(running.size())];
        all.release(a, now, false);
        one.release(twin[a], now, false);
        twin.erase(a);
        route_of.erase(a);
      }
      one.flush(now);
      for (const auto& [a, b] : twin) {
        if (waiting.contains(a)) continue;
        INFO("trial " << trial << " step " << step << " flow " << a);
        if (all.rate(a) == kUnlimited)
          CHECK(one.rate(b) == kUnlimited);
        else
          CHECK(one.rate(b) == Approx(all.rate(a)).epsilon(1e-9).margin(1e-12));
      }
      for (ResourceId l = 0; l < links; ++l) {
        INFO("trial " << trial << " step " << step << " link " << l);
        const ResourceId r = tied.representative(l);
        CHECK(one.bytes(r) == Approx(all.bytes(l)).epsilon(1e-9).margin(1e-12));
        CHECK(one.busy_time(r, now) == Approx(all.busy_time(l, now)).epsilon(1e-9).margin(1e-12));
      }
    }
  }
  CHECK(splits > 100);  // routes appearing mid-run split classes under running flows
}
