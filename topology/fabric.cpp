#include <nlohmann/json.hpp>

#include "topology/build_state.hpp"

namespace collsim::topo {

void build_fabric(const nlohmann::json& /*fabric*/, BuildState& state) {
  state.sink.error("/fabric", "the \"fabric\" section is not implemented yet");
}

}  // namespace collsim::topo
