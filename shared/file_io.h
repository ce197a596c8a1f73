#pragma once
// Durable small-file I/O shared by both daemons: key pairs, checkpoints, the worker's result
// spool. (Images go through shared/image_io.h.)

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "shared/status.h"

namespace tessera::file_io {

// Writes `pieces` one after another to `path` atomically and durably: into PATH.tmp (created
// with `mode`), fsync, then rename over `path`. A crash leaves the old file or the new one,
// never half of one; on failure the temporary file is removed.
Status WriteAtomically(const std::string& path, const std::vector<std::string_view>& pieces,
                       mode_t mode);

// The whole file (NotFound when it cannot be opened).
StatusOr<std::string> ReadAll(const std::string& path);

}  // namespace tessera::file_io
