// memra-bench --table: every figure of issue #15's performance table in one run, on
// random-weight models of one shape (Qwen3-8B by default): decode tok/s and roofline
// fraction per scheme (bf16, q8_0, q4_k, fp8), the depth-4096 / depth-0 decode ratio
// (bf16, q4_k), pp512 per scheme, the TTFT of a 2,048-token bf16 prompt, the batch-8 /
// batch-1 decode step ratio (bf16, q4_k) and the aggregate decode rate of 8 concurrent
// streams through the scheduler (bf16). Each part prints its usual lines as it runs;
// the table at the end sets each figure beside llama.cpp's (the measurement)
// and the floor and goal it must reach.
#pragma once

#include <string>

#include "core/plugin_host/plugin_host.hpp"
#include "host/engine/kv_dtype.hpp"
#include "memra/abi.h"
#include "memra/backend.h"

namespace memra::bench {

struct TableBenchOptions {
  std::string shape_json;  // the random models' config.json
  std::string shape_name;  // for the report
  memra_backend_kind backend = MEMRA_BACKEND_CUDA;
  memra_dtype kv_dtype = engine::kDefaultKvDtype;
  int repeats = 3;
  double hbm_gbps = 4300;  // the roofline's bandwidth where none can be measured (CPU)
};

// Returns the exit code: 1 when a part fails (a floor not met is reported, not an error).
int run_table_bench(const TableBenchOptions& o, const plugins::PluginHost& plugins);

}  // namespace memra::bench
