#include "host/server/server_state.hpp"

namespace memra::server {

ServerState::Admission::~Admission() {
  if (state_ != nullptr) state_->admitted_.fetch_sub(1);
}

ServerState::Admission ServerState::try_admit() {
  admitted_.fetch_add(1);
  if (draining_.load()) {
    admitted_.fetch_sub(1);
    return Admission();
  }
  return Admission(this);
}

void ServerState::begin_drain() { draining_.store(true); }

}  // namespace memra::server
