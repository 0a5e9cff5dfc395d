#include "core/plugin_host/kernel_services.hpp"

namespace memra::plugins {
namespace {
thread_local KernelServices* t_current = nullptr;
}

ScopedKernelServices::ScopedKernelServices(KernelServices* services) : previous_(t_current) { t_current = services; }
ScopedKernelServices::~ScopedKernelServices() { t_current = previous_; }
KernelServices* current_kernel_services() { return t_current; }

}  // namespace memra::plugins
