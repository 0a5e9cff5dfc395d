// Versioned schema migrations of the registry database.
#pragma once

#include "core/common/result.hpp"
#include "registry/sqlite.hpp"

namespace memra::registry {

// Reads the schema version (0 = empty database) and refuses files that are not
// ours or are newer than this build.
Result<int> inspect_schema(sql::Db& db);

// Applies every migration above the database's version, in order, inside one
// IMMEDIATE transaction (so two processes opening a new file cannot both migrate).
Status migrate(sql::Db& db);

}  // namespace memra::registry
