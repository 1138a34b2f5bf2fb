#include "sim/resources.hpp"

namespace collsim::sim {

double ResourceMap::capacity(const topo::Topology& t, ResourceId r) const {
  switch (kind(r)) {
    case ResourceKind::link:
      return t.link(index(r)).bandwidth;
    case ResourceKind::memory:
      return t.node(index(r)).memory_bandwidth;
    case ResourceKind::memcpy:
      return t.node(index(r)).memcpy_bandwidth;
  }
  return kUnlimited;
}

std::string ResourceMap::name(const topo::Topology& t, ResourceId r) const {
  switch (kind(r)) {
    case ResourceKind::link: {
      const auto& l = t.link(index(r));
      return t.node(l.from).name + "->" + t.node(l.to).name;
    }
    case ResourceKind::memory:
      return t.node(index(r)).name + " memory";
    case ResourceKind::memcpy:
      return t.node(index(r)).name + " memcpy";
  }
  return "?";
}

}  // namespace collsim::sim
