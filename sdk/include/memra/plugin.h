/* memra C ABI — the plugin descriptor and the two exported entry points.
 *
 * A plugin .so exports exactly:
 *   const memra_plugin_descriptor* memra_plugin_query(void);
 *       cheap, side-effect free, no CUDA; returns a descriptor with static lifetime.
 *   memra_status memra_plugin_init(const memra_host_api* host, memra_plugin_api* out);
 *       `out` is allocated by the host with out->struct_size set to the size the
 *       host knows; the plugin fills the slots that fit and never writes past it,
 *       including out->ctx: its state for this host (the host table lives there).
 *
 * See sdk/examples/ and docs/PLUGINS.md for a complete plugin.
 */
#ifndef MEMRA_PLUGIN_H
#define MEMRA_PLUGIN_H

#include "memra/abi.h"
#include "memra/host_api.h"
#include "memra/family.h"
#include "memra/quant.h"
#include "memra/ops.h"

MEMRA_EXTERN_C_BEGIN

typedef int32_t memra_plugin_kind;
#define MEMRA_PLUGIN_KIND_FAMILY 1 /* a model family: config -> plan, forward pass */
#define MEMRA_PLUGIN_KIND_QUANT 2  /* a quant scheme: layout, quantise, matmul kernels */

/* Score for a device and a handled name (architecture or scheme): < 0 means
 * "cannot run here"; among plugins handling the same name the highest wins. */
typedef int32_t (*memra_plugin_score_fn)(const memra_device_info* device, const char* handled_name);

typedef struct memra_plugin_descriptor {
  size_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  memra_plugin_kind kind;
  const char* name;               /* unique among loaded plugins, e.g. "llama", "q4_k" */
  const char* version;            /* the plugin's own version, e.g. "0.1.0" */
  const char* description;        /* one line, for logs and `memra-host --list-plugins` */
  const char* const* handles;     /* NULL-terminated: architectures or quant schemes */
  memra_plugin_score_fn score;    /* NULL = score 0 for every device */
} memra_plugin_descriptor;
#define MEMRA_PLUGIN_DESCRIPTOR_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_plugin_descriptor, score)

typedef struct memra_plugin_api {
  size_t struct_size;
  memra_plugin_kind kind;
  /* The plugin's state for this host (the host table it was given, its caches), passed
   * back to every table function that takes one; each memra_plugin_init call makes
   * its own, so two hosts in one process never share a plugin's state. */
  memra_plugin_ctx* ctx;
  const memra_family_api* family; /* set by family plugins; static lifetime */
  const memra_quant_api* quant;   /* set by quant plugins; static lifetime */
  /* Optional (NULL: nothing to free). Called once when the host is done with `ctx`,
   * after every object created through it is destroyed; frees the context. */
  void (*shutdown)(memra_plugin_ctx* ctx);
  /* ABI 2.7, family plugins, optional: the ops the plugin brings (memra/ops.h), an array
   * of num_ops definitions with static lifetime. Each name begins with the plugin's name
   * and a dot; the host refuses the plugin for a bad definition, naming the op. */
  size_t num_ops;
  const memra_op_def* ops;
} memra_plugin_api;
#define MEMRA_PLUGIN_API_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_plugin_api, ops)

typedef const memra_plugin_descriptor* (*memra_plugin_query_fn)(void);
typedef memra_status (*memra_plugin_init_fn)(const memra_host_api* host, memra_plugin_api* out);

#define MEMRA_PLUGIN_QUERY_SYMBOL "memra_plugin_query"
#define MEMRA_PLUGIN_INIT_SYMBOL "memra_plugin_init"

MEMRA_EXTERN_C_END

#endif /* MEMRA_PLUGIN_H */
