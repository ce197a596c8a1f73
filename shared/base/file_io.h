#pragma once
// Durable small-file I/O shared by both daemons: key pairs, checkpoints, the worker's result
// spool. (Images go through shared/images/image_io.h.)

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "shared/base/status.h"

namespace tessera::file_io {

// Writes `pieces` one after another to `path` atomically and durably: into PATH.tmp (created
// with `mode`), fsync, then rename over `path`. A crash leaves the old file or the new one,
// never half of one; on failure the temporary file is removed.
Status WriteAtomically(const std::string& path, const std::vector<std::string_view>& pieces,
                       mode_t mode);

// The whole file (NotFound when it cannot be opened).
StatusOr<std::string> ReadAll(const std::string& path);
// The whole of a file someone else may have placed (another step's frame on shared storage):
// never through a link at its last component (PermissionDenied), only a regular file
// (PermissionDenied), at most `max_bytes` (ResourceExhausted); NotFound when it is missing.
StatusOr<std::string> ReadPlainFile(const std::string& path, int64_t max_bytes);

// Data files (the database, blobs, parts, keys, the worker's spool and cache) are the daemon's
// user's alone: files mode 0600, folders 0700. Creates `dir` (mode 0700; missing parents with
// the usual mode) or, when it exists, makes it 0700.
Status MakePrivateDirectory(const std::string& dir);

// What writers killed mid-write (kill -9, power loss) left under `root`, recursively: files named
// "PATH.tmp" (WriteAtomically, the assembler's parts) and ".NAME.tmp-PID-N" (image::
// WriteAtomically) whose process PID is gone or is the caller's own. Removed, and their paths
// returned. Only for a daemon's own folders at start-up, before anything of its own writes
// there: a ".tmp" name carries no PID to tell a live writer by.
std::vector<std::string> RemoveLeftoverTempFiles(const std::string& root);

}  // namespace tessera::file_io
