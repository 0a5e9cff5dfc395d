#include "host/server/model_loader.hpp"

#include <chrono>
#include <map>

#include "core/plugin_host/plugin_host.hpp"
#include "host/backend/backend.hpp"
#include "host/engine/draft_loader.hpp"
#include "host/engine/draft_model.hpp"
#include "host/engine/mtp_drafter.hpp"
#include "host/engine/model_cache.hpp"
#include "registry/registry.hpp"
#include "repack/format/reader.hpp"
#include "repack/tool/fault_hook.hpp"
#include "repack/tool/source.hpp"
#include "repack/tool/validate.hpp"

namespace memra::server {
namespace {

LoadOutcome failure(LoadFailure kind, std::string message) {
  LoadOutcome out;
  out.error = {kind, std::move(message)};
  return out;
}

// Bytes of the model's matrices (2-D weights) per quant scheme. A mixed checkpoint (NVFP4
// MLPs with bf16 attention, a q4_k repack with its q6_k head) is gated per scheme.
std::map<std::string, std::uint64_t> matrix_schemes(const engine::ModelSource& source) {
  std::map<std::string, std::uint64_t> bytes;
  for (const memra_weight& w : source.weights) {
    if (w.ndim == 2 && w.quant != nullptr) bytes[w.quant] += w.bytes;
  }
  return bytes;
}

// The quant scheme holding most bytes of the model's matrices: the one that decides speed
// and accuracy, the one the model is reported by.
std::string dominant_quant(const engine::ModelSource& source) {
  const std::map<std::string, std::uint64_t> bytes = matrix_schemes(source);
  std::string best;
  std::uint64_t most = 0;
  for (const auto& [scheme, n] : bytes) {
    if (n > most) {
      most = n;
      best = scheme;
    }
  }
  return best;
}

}  // namespace

std::filesystem::path default_model_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return std::filesystem::path("share/memra/default_model");
  return (exe.parent_path() / ".." / "share" / "memra" / "default_model").lexically_normal();
}

LoadOutcome load_served_model(const ModelSpec& spec, const HostOptions& options, const plugins::PluginHost& plugins,
                              const registry::Registry& registry, Poco::Logger& log, const std::atomic<bool>* stop) {
  const std::string what = "model '" + spec.alias + "' (" + spec.path + ")";
  // The backend: CUDA when asked for (or, with auto, when a driver and the module load),
  // else the CPU reference. The gate is keyed by the device's architecture.
  std::string arch = "cpu";
  memra_backend_kind backend_kind = MEMRA_BACKEND_CPU;
  std::string backend_label = "CPU";
  if (options.backend != BackendChoice::cpu) {
    backend::BackendOptions cuda;
    cuda.kind = MEMRA_BACKEND_CUDA;
    auto probe = backend::open_backend(cuda);
    if (probe) {
      const memra_device_info info = (*probe)->device_info();
      arch = info.arch ? info.arch : "unknown";
      backend_kind = MEMRA_BACKEND_CUDA;
      backend_label = "CUDA";
      log.information("%s: CUDA backend on %s (%s)", what, std::string(info.name ? info.name : "GPU"), arch);
    } else if (options.backend == BackendChoice::cuda) {
      return failure(LoadFailure::backend_unavailable,
                     "cannot load " + what + " on --backend cuda: the CUDA backend is not available here (" +
                         probe.error().message + "); use --backend cpu (or auto)");
    }
  }

  auto source = engine::open_model_source(spec.path, plugins);
  if (!source) return failure(LoadFailure::bad_model, "cannot load " + what + ": " + source.error().message);
  const ModelConfig config = (*source)->config;
  const std::string family_name = config.family;  // the plugin that normalised it
  const std::string quant = dominant_quant(**source);
  if (quant.empty()) return failure(LoadFailure::bad_model, "cannot load " + what + ": the checkpoint has no weight matrices");

  // Speculative decoding: --spec, else draft where the model has one.
  const std::string draft_path = !spec.draft.empty() ? spec.draft : options.draft_path;
  const std::string spec_kind = !options.spec.empty() ? options.spec : (draft_path.empty() ? "off" : "draft");
  if (spec_kind == "mtp")
    if (const std::string why = engine::draft_head_unavailable(**source, plugins); !why.empty())
      return failure(LoadFailure::bad_model, "cannot serve " + what + " with --spec mtp: " + why +
                                             "; use --spec ngram, or --spec draft with a draft model");
  if (spec_kind == "draft" && draft_path.empty())
    return failure(LoadFailure::bad_model, "cannot serve " + what + " with --spec draft: it has no draft model; give one "
                                           "with --model ALIAS=PATH+DRAFT or --draft PATH");

  // The registry gate: before any memory is spent on the engine or written to disk.
  // The model's combo without a drafter, then, when it speculates, with its drafter
  // ("ngram" or "draft"): a drafter never changes tokens by construction, but the
  // registry records where the identity gates actually ran.
  std::vector<std::string> drafters = {""};
  if (spec_kind != "off") drafters.push_back(spec_kind);
  registry::Verdict model_verdict = registry::Verdict::generic;  // of the combo without a drafter
  // Every scheme of the model's matrices is a combo of its own: the dominant one first, then
  // the others (a mixed checkpoint loads only when each of its schemes may).
  std::vector<std::string> schemes = {quant};
  for (const auto& [scheme, bytes] : matrix_schemes(**source))
    if (scheme != quant) schemes.push_back(scheme);
  for (const std::string& drafter : drafters) for (const std::string& scheme : schemes) {
    const registry::ComboKey key{family_name, scheme, drafter, arch};
    const std::string combo = "(family " + family_name + ", quant " + scheme + ", " +
                              (drafter.empty() ? "no drafter" : "drafter " + drafter) + ", arch " + arch + ")";
    const std::string part = scheme == quant ? "" : ", which some of its matrices use,";
    const std::string instead = drafter.empty() ? "" : "; serve it without speculation (--spec off) instead";
    auto verdict = registry.check(key);
    if (!verdict) {
      return failure(LoadFailure::gate_refused, "cannot load " + what + ": the registry could not be read: " +
                                                    verdict.error().message);
    }
    if (drafter.empty() && (scheme == quant || *verdict != registry::Verdict::supported))
      model_verdict = scheme == quant ? *verdict : registry::Verdict::generic;
    switch (*verdict) {
      case registry::Verdict::supported:
        log.information("%s: registry verdict supported for %s", what, combo);
        break;
      case registry::Verdict::rejected:
        return failure(LoadFailure::gate_refused,
                       "refusing " + what + ": the registry marks " + combo + part +
                           " as rejected (known not to work); it never loads" + instead +
                           ". See memra-registry combos and docs/REGISTRY.md");
      case registry::Verdict::generic:
        if (!options.allow_generic) {
          return failure(LoadFailure::gate_refused,
                         "refusing " + what + ": " + combo + part + " is not verified (registry verdict generic). Pass "
                         "--allow-generic to run it anyway on the generic path, unverified" + instead);
        }
        log.warning("UNVERIFIED: %s runs %s, which the registry has not verified (verdict generic); loaded because of "
                    "--allow-generic. Its outputs are not checked against an oracle on this path.",
                    what, combo);
        break;
    }
  }

  // The tokenizer and chat template, from the checkpoint itself: before any repack, so a
  // broken tokenizer.json stops the load with nothing written.
  log.information("%s: loading the tokenizer and chat template", what);
  auto text = engine::load_text_model(spec.path, config);
  if (!text) return failure(LoadFailure::bad_model, "cannot load " + what + ": " + text.error().message);
  if (const std::string tpl = chat_template_for(options, spec.alias); !tpl.empty()) {
    auto replaced = engine::load_chat_template_file(tpl);
    if (!replaced) return failure(LoadFailure::bad_model, "cannot load " + what + ": --chat-template " + replaced.error().message);
    text->chat_template = std::move(*replaced);
    log.information("%s: chat template from %s (--chat-template)", what, tpl);
  }

  // An embedding model says so in sentence-transformers' files next to its weights.
  auto embedding = engine::read_embedding_config(spec.path, config.hidden_size);
  if (!embedding) return failure(LoadFailure::bad_model, "cannot load " + what + ": " + embedding.error().message);
  if (*embedding)
    log.information("%s: an embedding model (%s pooling%s; POST /v1/embeddings)", what, std::string(engine::to_string((*embedding)->pooling)),
                    std::string((*embedding)->normalize ? ", normalised" : ""));

  // Served in place: no repack checks its weights, so they are checked here (one pass).
  if (!options.repack_on_load && !format::is_memra_dir(spec.path)) {
    auto checked = repack::Source::open(spec.path, plugins);
    if (!checked) return failure(LoadFailure::bad_model, "cannot load " + what + ": " + checked.error().message);
    if (auto finite = repack::check_all_finite(**checked); !finite)
      return failure(LoadFailure::bad_model, "cannot load " + what + ": " + finite.error().message);
  }

  // First load: repack into .memra once (after the gate, so nothing is written for a
  // refused model) and record provenance; later loads reuse the repack.
  if (options.repack_on_load) {
    engine::ModelCacheOptions cache;
    auto home = registry::memra_home();
    auto reg_path = options.registry_path.empty() ? registry::default_path()
                                                  : Result<std::filesystem::path>(std::filesystem::path(options.registry_path));
    if (!home || !reg_path) return failure(LoadFailure::bad_model, "cannot load " + what + ": MEMRA_HOME is not usable");
    cache.registry_path = *reg_path;
    cache.cache_dir = *home / "repacks";
    cache.log = [&log](const std::string& line) { log.information("%s", line); };
    cache.plugins = &plugins;
    cache.cancel = stop;
    cache.fault = repack::fault_from_env(stop);
    // Before a repack is written: the family binds the model to the checkpoint's weights
    // (on the CPU reference backend, a one-block KV cache), as the real load will.
    cache.validate = [&]() -> Status {
      auto probe = engine::open_model_source(spec.path, plugins);
      if (!probe) return probe.error();
      engine::EngineOptions po;
      po.backend.kind = MEMRA_BACKEND_CPU;
      po.max_context = 16;
      po.max_sequences = 1;
      auto bound = engine::Engine::create(std::move(*probe), plugins, po);
      if (!bound) return bound.error();
      return {};
    };
    auto prepared = engine::prepare_model(spec.path, cache);
    if (!prepared) return failure(LoadFailure::bad_model, "cannot load " + what + ": " + prepared.error().message);
    if (prepared->path != spec.path) {
      auto repacked = engine::open_model_source(prepared->path, plugins);
      if (!repacked) return failure(LoadFailure::bad_model, "cannot load " + what + " from its repack: " + repacked.error().message);
      source = std::move(repacked);
    }
  }

  engine::EngineOptions eo;
  eo.max_context = options.max_context;
  eo.backend.kind = backend_kind;
  eo.pipeline_stages = options.pipeline_stages;
  eo.pipeline_split = options.pp_split;
  eo.pipeline_devices = options.pp_devices;
  eo.kv_dtype = options.kv_dtype;
  // A step adds at most the step budget (or a verify step's drafts) to a sequence.
  eo.max_step_tokens = std::max<std::int64_t>(options.max_step_tokens, options.spec_k + 1);
  // Speculating: a hybrid's rollback copies a row's state snapshot back instead of replaying.
  if (spec_kind != "off") eo.state_snapshot_rows = options.spec_k;
  eo.draft_head = spec_kind == "mtp";
  if (options.max_context > 0 && config.max_position_embeddings > 0 &&
      options.max_context > config.max_position_embeddings) {
    return failure(LoadFailure::bad_model, "cannot load " + what + ": --max-context " +
                                               std::to_string(options.max_context) + " is beyond the model's " +
                                               std::to_string(config.max_position_embeddings) + " positions");
  }
  // The memory plan sizes the context and the caches (docs/SERVING.md, "Memory plan");
  // pipeline stages do not plan yet: the model's context up to 4096, 8 sequences of it.
  eo.plan_memory = true;
  eo.memory_fraction = options.gpu_memory_fraction;
  eo.kv_cache_tokens = options.kv_cache_tokens;
  eo.max_sequences = options.max_running;
  if (options.pipeline_stages > 1) eo.max_sequences = 8;  // unplanned: 8 contexts, or --kv-cache-tokens

  const auto setup_start = std::chrono::steady_clock::now();
  log.information("%s: setting up the engine (%s backend%s)", what, backend_label,
                  options.pipeline_stages > 1 ? ", " + std::to_string(options.pipeline_stages) + " pipeline stages" : std::string());
  auto eng = engine::Engine::create(std::move(*source), plugins, eo);
  if (!eng) return failure(LoadFailure::bad_model, eng.error().message);
  log.information("%s: engine ready in %s ms (weights in place, KV cache allocated)", what,
                  std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - setup_start).count()));
  if (options.pipeline_stages > 1) log.information("%s: pipeline stages: %s", what, (*eng)->backend().describe());
  if (const engine::MemoryPlan* plan = (*eng)->memory_plan()) {
    for (const std::string& line : plan->lines) log.information("%s: %s", what, line);
    if (plan->context_reduced) log.warning("%s: the context is REDUCED to %s tokens to fit the device (see the memory plan above)", what,
                                           std::to_string(plan->context));
  }
  std::unique_ptr<engine::Engine> draft_engine;
  if (spec_kind == "draft") {
    // Served in place (no repack, no registry row): a draft only changes speed, never
    // the tokens, so the target's gate verdict is what matters.
    auto d = engine::open_draft_engine(draft_path, **eng, *text->tokenizer, plugins, eo);
    if (!d) return failure(LoadFailure::bad_model, "cannot load " + what + ": " + d.error().message);
    draft_engine = std::move(*d);
    log.information("%s: speculative decoding with draft model %s (k %s; draft costs ~%s of a target step per token)",
                    what, draft_path, std::to_string(options.spec_k),
                    std::to_string(engine::draft_cost_estimate(**eng, *draft_engine)));
  } else if (spec_kind == "ngram") {
    log.information("%s: speculative decoding with the n-gram drafter (k %s)", what, std::to_string(options.spec_k));
  }

  auto model = std::make_unique<ServedModel>();
  model->alias = spec.alias;
  model->path = spec.path;
  model->family = family_name;
  model->quant = quant;
  model->verdict = registry::to_string(model_verdict);
  model->created = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  model->text = std::move(*text);
  model->engine = std::move(*eng);
  model->draft_engine = std::move(draft_engine);
  model->spec = spec_kind;
  model->draft_path = spec_kind == "draft" ? draft_path : "";
  model->embedding = *embedding;
  engine::SchedulerOptions so;
  so.max_running = options.max_running;
  so.max_waiting = options.max_waiting;
  so.max_step_tokens = options.max_step_tokens;
  so.backfill_window = std::chrono::milliseconds(options.backfill_ms);
  // Embedding steps run one at a time: an embedding model's pipeline rolls no groups unless asked.
  so.pipeline_groups = options.pp_groups > 0 ? options.pp_groups : options.pipeline_stages > 1 && !*embedding ? 2 : 1;
  so.spec_k = static_cast<int>(options.spec_k);
  so.spec_max_batch = options.spec_max_batch;
  so.spec_policy.verify_token_cost = options.spec_verify_cost;
  if (spec_kind == "ngram") {
    so.make_drafter = [] { return std::make_unique<engine::NgramDrafter>(); };
  } else if (spec_kind == "draft") {
    engine::Engine* d = model->draft_engine.get();
    const double cost = engine::draft_cost_estimate(*model->engine, *d);
    so.make_drafter = [d, cost] { return std::make_unique<engine::DraftModelDrafter>(*d, cost); };
  } else if (spec_kind == "mtp") {
    engine::Engine* t = model->engine.get();
    const double cost = engine::mtp_draft_cost(*t);
    so.make_drafter = [t, cost] { return std::make_unique<engine::MtpDrafter>(*t, cost); };
  }
  model->scheduler = std::make_unique<engine::Scheduler>(*model->engine, so);
  const auto& kv = model->engine->kv_blocks();
  log.information("loaded %s: %s %s, context %s tokens, KV cache %s blocks of %s tokens, up to %s running",
                  what, family_name, quant, std::to_string(model->max_context()), std::to_string(kv.num_blocks()),
                  std::to_string(model->engine->block_size()), std::to_string(options.max_running));
  return LoadOutcome{std::move(model), {}};
}

}  // namespace memra::server
