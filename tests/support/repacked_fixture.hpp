// A fixture model repacked in-process to another weight scheme (memra-repack's
// repack_checkpoint), once per process and scheme, into a directory removed at exit:
// e.g. the bf16 fixtures as f32, whose matmuls keep float32 activations, so a test can
// hold the float32 path to transformers within 1e-4 (the bf16 scheme computes on bf16
// activations: logits.hpp, kBf16ActivationBound).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "repack/tool/repack.hpp"
#include "tests/support/build_plugins.hpp"
#include "tests/support/temp_dir.hpp"

namespace memra::testing {

// The .memra directory of `source` with every tensor written as `scheme` (memra-repack
// --tensor-scheme '*=SCHEME'; "keep": --quant keep), or an empty path after a test failure
// naming why.
inline std::filesystem::path repacked_fixture(const std::filesystem::path& source, const std::string& scheme) {
  static std::map<std::string, std::filesystem::path> done;
  static TempDir dir("memra-repacked");
  const std::string key = source.string() + "|" + scheme;
  if (auto it = done.find(key); it != done.end()) return it->second;
  repack::RepackOptions o;
  o.plugins = &build_plugins();
  o.source = source;
  o.output = dir / (std::to_string(done.size()) + "-" + scheme + ".memra");
  if (scheme != "keep") o.overrides = {{"*", scheme}};
  o.threads = 2;
  auto r = repack::repack_checkpoint(o);
  EXPECT_TRUE(r.ok()) << source << " -> " << scheme << ": " << (r.ok() ? "" : r.error().message);
  if (!r) return {};
  return done[key] = r->output;
}

}  // namespace memra::testing
