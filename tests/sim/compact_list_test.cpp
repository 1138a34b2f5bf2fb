#include "sim/compact_list.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

namespace {

using collsim::sim::CompactList;

struct Item {
  std::uint32_t id;
  double value;
};

template <std::uint32_t Inline>
std::vector<std::uint32_t> ids(const CompactList<Item, Inline>& list) {
  std::vector<std::uint32_t> out;
  for (const Item& x : list) out.push_back(x.id);
  return out;
}

// The flow model's lists are swap-removed by position (a flow's Use names its slot), so a list
// must keep every element where it was as it moves from its record to the heap.
template <std::uint32_t Inline>
void check_order_across_growth() {
  CompactList<Item, Inline> list;
  std::vector<std::uint32_t> expected;
  for (std::uint32_t i = 0; i < 11; ++i) {
    list.push_back(Item{i, 0.5 * i});
    expected.push_back(i);
    REQUIRE(list.size() == i + 1);
    CHECK(list.spilled() == (i + 1 > Inline));
    CHECK(ids(list) == expected);
  }
  CHECK(list[7].value == 3.5);
  // Swap-remove the element at slot 2, as FlowModel::release does.
  list[2] = list.back();
  list.pop_back();
  expected[2] = expected.back();
  expected.pop_back();
  CHECK(ids(list) == expected);

  const CompactList<Item, Inline> copy = list;
  CHECK(ids(copy) == expected);
  CHECK(copy.data() != list.data());

  // Cleared, a list keeps its storage and takes new elements from slot 0.
  const Item* storage = list.data();
  list.clear();
  CHECK(list.empty());
  list.push_back(Item{42, 1.0});
  CHECK(list.data() == storage);
  CHECK(ids(list) == std::vector<std::uint32_t>{42});
}

}  // namespace

TEST_CASE("a compact list keeps its elements in place as it moves from its record to the heap") {
  SECTION("no inline room (heap from the first element)") {
    check_order_across_growth<0>();
  }
  SECTION("two inline elements (a resource's entries)") {
    check_order_across_growth<2>();
  }
  SECTION("six inline elements (a flow's uses)") {
    check_order_across_growth<6>();
  }
}

TEST_CASE("a compact list's inline elements live inside its own record") {
  CompactList<Item, 2> list;
  list.push_back(Item{1, 1.0});
  list.push_back(Item{2, 2.0});
  const auto* record = reinterpret_cast<const char*>(&list);
  const auto* first = reinterpret_cast<const char*>(list.data());
  CHECK(first >= record);
  CHECK(first + 2 * sizeof(Item) <= record + sizeof(list));
  list.push_back(Item{3, 3.0});
  first = reinterpret_cast<const char*>(list.data());
  CHECK((first < record || first >= record + sizeof(list)));
}
