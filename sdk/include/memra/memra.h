/* memra C ABI v2 — umbrella header: everything a plugin compiles against. */
#ifndef MEMRA_MEMRA_H
#define MEMRA_MEMRA_H
#include "memra/abi.h"
#include "memra/host_api.h"
#include "memra/family.h"
#include "memra/quant.h"
#include "memra/backend.h"
#include "memra/ops.h"
#include "memra/plugin.h"
#endif
