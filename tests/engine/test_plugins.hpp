// The engine tests' plugins: this build's (tests/support/build_plugins.hpp).
#pragma once

#include "tests/support/build_plugins.hpp"

inline memra::plugins::PluginHost& test_plugins() { return memra::testing::build_plugins(); }
