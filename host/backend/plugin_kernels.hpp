// Quant plugins' kernels and family plugins' ops into a backend's kernel registry (memra_quant_api.register_kernels),
// with the backend's kernel services bound while each plugin registers, so the modules
// it loads and the kernels it launches later belong to that backend.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/plugin_host/plugin_host.hpp"
#include "host/backend/backend.hpp"
#include "host/ops/op_registry.hpp"

namespace memra::backend {

// Calls register_kernels of every plugin in `quants` that has the slot. A plugin whose
// registration is refused (an arch the device cannot run, an unknown op, a failing
// register_kernels) gets one line naming it and the reason, and contributes no kernels;
// the others go on. Returns those lines (empty: all registered). A backend without
// kernel services (the CPU reference) registers nothing.
std::vector<std::string> register_plugin_kernels(Backend& backend, const std::vector<plugins::QuantPlugin>& quants);

// The ops a family plugin brings into `backend` (Backend::register_ops) with its kernel
// services bound, so each op's prepare_cuda loads modules onto it. Returns one line per
// op the backend cannot run (empty: all can).
std::vector<std::string> register_plugin_ops(Backend& backend, std::span<const ops::PluginOp> ops);

}  // namespace memra::backend
