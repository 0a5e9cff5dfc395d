// Sets a combo's verdict in a registry file the way a gate would, for tests that
// start memra-host against that registry.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "registry/registry.hpp"

namespace memra::server::testing {

inline void seed_verdict(const std::filesystem::path& db, const registry::ComboKey& key, registry::Verdict verdict,
                         const std::string& note) {
  auto reg = registry::Registry::open(db);
  ASSERT_TRUE(reg) << reg.error().message;
  registry::GateRecord g;
  g.key = key;
  g.gate = "server-test";
  g.pass = verdict == registry::Verdict::supported;
  g.note = note;
  g.verdict = verdict;
  auto r = reg->record_gate(g);
  ASSERT_TRUE(r) << r.error().message;
}

}  // namespace memra::server::testing
