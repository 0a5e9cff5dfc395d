// One plugin file, checked step by step. Each failure returns exactly one reason;
// the library of a refused file is unloaded (nothing from it lives).
#include "core/plugin_host/plugin_loader.hpp"

#include <dlfcn.h>

#include <boost/dll/shared_library.hpp>
#include <cctype>
#include <string_view>
#include <type_traits>
#include <vector>

namespace memra::plugins::detail {

namespace {

constexpr size_t kMaxHandles = 4096;  // guards against a handles list without its NULL
constexpr std::string_view kRebuild = " (rebuild the plugin against memra SDK 2.x)";

std::string one_line(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

std::string kind_name(memra_plugin_kind kind) {
  if (kind == MEMRA_PLUGIN_KIND_FAMILY) return "family";
  if (kind == MEMRA_PLUGIN_KIND_QUANT) return "quant";
  return std::to_string(kind);
}

template <class Fn>
Fn* resolve(boost::dll::shared_library& lib, const char* symbol) {
  if (!lib.has(symbol)) return nullptr;
  return &lib.get<Fn>(symbol);
}

// Descriptor checks; returns the refusal reason or "".
std::string check_descriptor(const memra_plugin_descriptor* d, PluginKind expected) {
  if (d == nullptr) return "memra_plugin_query returned NULL";
  constexpr size_t kHasMajor = MEMRA_STRUCT_SIZE(memra_plugin_descriptor, abi_major);
  if (d->struct_size < kHasMajor) {
    return "descriptor struct_size " + std::to_string(d->struct_size) + " is too small to hold the ABI version" +
           std::string(kRebuild);
  }
  if (d->abi_major != MEMRA_ABI_MAJOR) {
    return "ABI major " + std::to_string(d->abi_major) + ", host supports " + std::to_string(MEMRA_ABI_MAJOR) +
           std::string(kRebuild);
  }
  if (d->struct_size < MEMRA_PLUGIN_DESCRIPTOR_STRUCT_SIZE) {
    return "descriptor struct_size " + std::to_string(d->struct_size) + " is smaller than the v2.0 descriptor (" +
           std::to_string(MEMRA_PLUGIN_DESCRIPTOR_STRUCT_SIZE) + " bytes); set it to MEMRA_PLUGIN_DESCRIPTOR_STRUCT_SIZE" +
           std::string(kRebuild);
  }
  if (d->kind != MEMRA_PLUGIN_KIND_FAMILY && d->kind != MEMRA_PLUGIN_KIND_QUANT) {
    return "descriptor kind " + std::to_string(d->kind) + " is not MEMRA_PLUGIN_KIND_FAMILY (1) or MEMRA_PLUGIN_KIND_QUANT (2)";
  }
  if (d->kind != static_cast<memra_plugin_kind>(expected)) {
    return "descriptor kind is " + kind_name(d->kind) + " but the file name says " +
           std::string(to_string(expected)) + " (name the file libmemra-" + kind_name(d->kind) +
           "-<name>.so or fix the descriptor)";
  }
  if (d->name == nullptr || d->name[0] == '\0') return "descriptor has no name (name is NULL or empty)";
  const char* what = expected == PluginKind::family ? "architectures" : "quant schemes";
  if (d->handles == nullptr || d->handles[0] == nullptr) {
    return std::string("descriptor handles no ") + what + " (handles is NULL or empty)";
  }
  for (size_t i = 0; d->handles[i] != nullptr; ++i) {
    if (i >= kMaxHandles) return "descriptor handles list has no terminating NULL within 4096 entries";
    if (d->handles[i][0] == '\0') return "descriptor handles[" + std::to_string(i) + "] is an empty string";
  }
  return "";
}

// The tables as SDK 2.0 defined them: the least a plugin may hand over. Frozen: a minor
// version appends slots (read only where struct_size covers them, MEMRA_STRUCT_HAS), so
// these must never follow the current MEMRA_*_API_STRUCT_SIZE.
constexpr size_t kFamilyApiV20Size = MEMRA_STRUCT_SIZE(memra_family_api, model_destroy);
constexpr size_t kQuantApiV20Size = MEMRA_STRUCT_SIZE(memra_quant_api, matmul);

// Table checks after a successful init; returns the refusal reason or "".
std::string check_tables(const memra_plugin_api& api, memra_plugin_kind kind) {
  if (api.kind != kind) {
    return "memra_plugin_init set memra_plugin_api.kind " + kind_name(api.kind) + " but the descriptor says " +
           kind_name(kind);
  }
  auto missing = [](const char* table, const char* slot) {
    return std::string(table) + " table slot " + slot + " is NULL (every v2.0 slot is required)";
  };
  if (kind == MEMRA_PLUGIN_KIND_FAMILY) {
    const memra_family_api* f = api.family;
    if (f == nullptr) return "memra_plugin_init returned no family table (memra_plugin_api.family is NULL)";
    if (f->struct_size < kFamilyApiV20Size) {
      return "family table struct_size " + std::to_string(f->struct_size) + " is smaller than v2.0 (" +
             std::to_string(kFamilyApiV20Size) + " bytes); set it to MEMRA_FAMILY_API_STRUCT_SIZE";
    }
    if (f->config_normalize == nullptr) return missing("family", "config_normalize");
    if (f->tensor_name == nullptr) return missing("family", "tensor_name");
    if (f->plan_create == nullptr) return missing("family", "plan_create");
    if (f->plan_describe == nullptr) return missing("family", "plan_describe");
    if (f->plan_info == nullptr) return missing("family", "plan_info");
    if (f->plan_destroy == nullptr) return missing("family", "plan_destroy");
    if (f->model_create == nullptr) return missing("family", "model_create");
    if (f->model_forward == nullptr) return missing("family", "model_forward");
    if (f->model_destroy == nullptr) return missing("family", "model_destroy");
  } else {
    const memra_quant_api* q = api.quant;
    if (q == nullptr) return "memra_plugin_init returned no quant table (memra_plugin_api.quant is NULL)";
    if (q->struct_size < kQuantApiV20Size) {
      return "quant table struct_size " + std::to_string(q->struct_size) + " is smaller than v2.0 (" +
             std::to_string(kQuantApiV20Size) + " bytes); set it to MEMRA_QUANT_API_STRUCT_SIZE";
    }
    if (q->weight_bytes == nullptr) return missing("quant", "weight_bytes");
    if (q->quantize == nullptr) return missing("quant", "quantize");
    if (q->dequantize == nullptr) return missing("quant", "dequantize");
    if (q->matmul == nullptr) return missing("quant", "matmul");
  }
  return "";
}

// The ops a plugin brings (memra_plugin_api.ops, ABI 2.7): each definition checked, the
// first bad one named; returns the refusal reason or "".
std::string check_ops(const memra_plugin_api& api, memra_plugin_kind kind, const std::string& plugin) {
  if (api.num_ops == 0) return "";
  if (kind != MEMRA_PLUGIN_KIND_FAMILY) return "memra_plugin_api.ops is set, but only family plugins bring ops";
  if (api.ops == nullptr) return "memra_plugin_api.num_ops is " + std::to_string(api.num_ops) + " but ops is NULL";
  constexpr size_t kMaxOps = 4096;
  if (api.num_ops > kMaxOps) return "memra_plugin_api.num_ops " + std::to_string(api.num_ops) + " is more than " + std::to_string(kMaxOps);
  const std::string prefix = plugin + ".";
  for (size_t i = 0; i < api.num_ops; ++i) {
    const memra_op_def& d = api.ops[i];
    std::string who = "op " + std::to_string(i);
    if (d.struct_size < MEMRA_OP_DEF_STRUCT_SIZE)
      return who + ": memra_op_def struct_size " + std::to_string(d.struct_size) + " is smaller than 2.7's (" +
             std::to_string(MEMRA_OP_DEF_STRUCT_SIZE) + "); set it to MEMRA_OP_DEF_STRUCT_SIZE";
    if (d.name == nullptr || std::string_view(d.name).size() <= prefix.size() || !std::string_view(d.name).starts_with(prefix))
      return who + (d.name ? " '" + std::string(d.name) + "'" : std::string(" (no name)")) + ": an op's name is '" + prefix +
             "<op>' (the plugin's name, a dot, the op's)";
    who = "op '" + std::string(d.name) + "' v" + std::to_string(d.version);
    for (char c : std::string_view(d.name).substr(prefix.size()))
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'))
        return who + ": the name may hold letters, digits, '_' and '.' only";
    if (d.version == 0) return who + ": version 0 (attribute struct versions start at 1)";
    if (d.attrs_size < sizeof(size_t))
      return who + ": bad attribute struct: attrs_size " + std::to_string(d.attrs_size) +
             " cannot hold its struct_size (every attribute struct begins with size_t struct_size)";
    if (d.attrs_size > (1u << 16)) return who + ": bad attribute struct: attrs_size " + std::to_string(d.attrs_size) + " is over 64 KiB";
    if ((d.flags & ~(MEMRA_OP_NEEDS_BATCH | MEMRA_OP_USES_STATE | MEMRA_OP_SNAPSHOTS)) != 0)
      return who + ": unknown flags " + std::to_string(d.flags) + " (MEMRA_OP_NEEDS_BATCH, MEMRA_OP_USES_STATE, MEMRA_OP_SNAPSHOTS)";
    if ((d.flags & MEMRA_OP_SNAPSHOTS) && !(d.flags & MEMRA_OP_USES_STATE))
      return who + ": MEMRA_OP_SNAPSHOTS needs MEMRA_OP_USES_STATE (a snapshot is of the op's state)";
    if ((d.flags & MEMRA_OP_USES_STATE) && !(d.flags & MEMRA_OP_NEEDS_BATCH))
      return who + ": MEMRA_OP_USES_STATE needs MEMRA_OP_NEEDS_BATCH (state is found through the batch's slots)";
    if (d.run_cpu == nullptr) return who + ": run_cpu is NULL (the CPU reference is required)";
    if ((d.prepare_cuda == nullptr) != (d.run_cuda == nullptr)) return who + ": prepare_cuda and run_cuda come together";
    for (size_t j = 0; j < i; ++j)
      if (api.ops[j].version == d.version && std::string_view(api.ops[j].name) == d.name) return who + " is listed twice";
  }
  return "";
}

}  // namespace

std::optional<PluginKind> kind_from_file_name(std::string_view name) {
  constexpr std::string_view suffix = ".so";
  auto match = [&](std::string_view prefix) {
    return name.size() > prefix.size() + suffix.size() && name.starts_with(prefix) && name.ends_with(suffix);
  };
  if (match("libmemra-family-")) return PluginKind::family;
  if (match("libmemra-quant-")) return PluginKind::quant;
  return std::nullopt;
}

LoadOutcome load_plugin_file(const std::filesystem::path& file, std::shared_ptr<const HostEnvironment> env,
                             const RegisteredLookup& registered) {
  LoadOutcome out;
  auto refuse = [&](std::string reason) {
    out.refusal = one_line(std::move(reason));
    return std::move(out);
  };

  std::optional<PluginKind> expected = kind_from_file_name(file.filename().string());
  if (!expected) return refuse("file name is not libmemra-family-<name>.so or libmemra-quant-<name>.so");

  // RTLD_NOW: unresolved symbols refuse the file now instead of crashing later.
  auto lib = std::make_shared<boost::dll::shared_library>();
  std::error_code ec;
  lib->load(file, ec, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  if (ec || !lib->is_loaded()) {
    const char* dl = ::dlerror();  // Boost.DLL leaves the dlopen error in place
    return refuse(std::string("cannot load the library: ") + (dl != nullptr ? dl : ec.message()));
  }

  using QueryFn = std::remove_pointer_t<memra_plugin_query_fn>;
  using InitFn = std::remove_pointer_t<memra_plugin_init_fn>;
  QueryFn* query = resolve<QueryFn>(*lib, MEMRA_PLUGIN_QUERY_SYMBOL);
  if (query == nullptr) {
    return refuse("does not export memra_plugin_query (define it with MEMRA_EXPORT so it has C linkage and "
                  "default visibility)");
  }
  InitFn* init = resolve<InitFn>(*lib, MEMRA_PLUGIN_INIT_SYMBOL);
  if (init == nullptr) {
    return refuse("does not export memra_plugin_init (define it with MEMRA_EXPORT so it has C linkage and "
                  "default visibility)");
  }

  const memra_plugin_descriptor* desc = nullptr;
  try {
    desc = query();
  } catch (const std::exception& e) {
    return refuse(std::string("memra_plugin_query threw a C++ exception (") + e.what() +
                  "); exported functions must catch everything");
  } catch (...) {
    return refuse("memra_plugin_query threw a C++ exception; exported functions must catch everything");
  }
  if (std::string reason = check_descriptor(desc, *expected); !reason.empty()) return refuse(reason);

  std::string name = desc->name;
  if (std::optional<std::filesystem::path> other = registered(name)) {
    return refuse("duplicate plugin name '" + name + "' (already registered from " + other->string() +
                  "; earlier search directories take precedence)");
  }

  auto services = std::make_unique<HostServices>(name, std::move(env), file.parent_path().string());
  memra_plugin_api api{};
  api.struct_size = MEMRA_PLUGIN_API_STRUCT_SIZE;
  memra_status status = MEMRA_ERR_INTERNAL;
  try {
    status = init(services->api(), &api);
  } catch (const std::exception& e) {
    return refuse(std::string("memra_plugin_init threw a C++ exception (") + e.what() +
                  "); exported functions must catch everything");
  } catch (...) {
    return refuse("memra_plugin_init threw a C++ exception; exported functions must catch everything");
  }
  if (status != MEMRA_OK) {
    std::string detail = services->last_error();
    if (detail.empty()) detail = "the plugin reported no detail through error_report";
    return refuse(std::string("memra_plugin_init failed (") + memra_status_name(status) + "): " + detail);
  }
  std::string reason = check_tables(api, desc->kind);
  if (reason.empty()) reason = check_ops(api, desc->kind, name);
  if (!reason.empty()) {
    // init succeeded, so let the plugin release what it set up before it is unloaded.
    if (api.shutdown != nullptr) {
      try {
        api.shutdown(api.ctx);
      } catch (...) {
      }
    }
    return refuse(reason);
  }

  PluginInfo info;
  info.name = name;
  info.version = desc->version != nullptr ? desc->version : "";
  info.description = desc->description != nullptr ? desc->description : "";
  info.kind = *expected;
  info.file = file;
  for (size_t i = 0; desc->handles[i] != nullptr; ++i) info.handles.emplace_back(desc->handles[i]);
  info.abi_major = desc->abi_major;
  info.abi_minor = desc->abi_minor;
  out.record = std::make_shared<PluginRecord>(std::move(lib), std::move(services), std::move(info), desc, api);
  return out;
}

}  // namespace memra::plugins::detail
