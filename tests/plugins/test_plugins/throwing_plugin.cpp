// A badly written C++ test plugin that lets exceptions escape its entry points
// (THROW_IN_QUERY or THROW_IN_INIT). The host must catch them and refuse the file.
#include <memra/memra.h>

#include <stdexcept>

namespace {

const char* const k_handles[] = {"throwing_q", nullptr};

const memra_plugin_descriptor k_desc = {
    MEMRA_PLUGIN_DESCRIPTOR_STRUCT_SIZE, MEMRA_ABI_MAJOR, MEMRA_ABI_MINOR, MEMRA_PLUGIN_KIND_QUANT, PLUGIN_NAME,
    "0.1.0", "test plugin that throws", k_handles, nullptr,
};

}  // namespace

MEMRA_EXPORT const memra_plugin_descriptor* memra_plugin_query(void) {
#ifdef THROW_IN_QUERY
  throw std::runtime_error("query exploded");
#endif
  return &k_desc;
}

MEMRA_EXPORT memra_status memra_plugin_init(const memra_host_api*, memra_plugin_api*) {
#ifdef THROW_IN_INIT
  throw std::runtime_error("init exploded");
#endif
  return MEMRA_ERR_INTERNAL;
}
