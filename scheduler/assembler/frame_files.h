#pragma once
// Writing a finished frame's files: the EXR, the 8-bit formats beside it and the dashboard's
// thumbnail, from a canvas of tiles that cover the frame (a whole frame is one tile; a split
// frame's parts are many). Assembler threads call it; it keeps no state.

#include <cstdint>
#include <string>
#include <vector>

#include "scheduler/assembler/assembler.h"
#include "scheduler/assembler/part_spool.h"
#include "shared/base/status.h"

namespace tessera::assembler {

// A frame as tiles of finished pixels that cover it exactly once.
struct Canvas {
  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<std::string> channel_names;  // empty: OIIO's defaults (R, G, B, A, ...)
  std::vector<TileView> tiles;
};

// Writes the frame in every format the job asks for; `files` gets their paths in that order and
// `bytes` (when given) their total size.
Status WriteOutputs(const FrameOutput& output, int64_t job_id, int frame, const Canvas& c,
                    std::vector<std::string>* files, uint64_t* bytes);

}  // namespace tessera::assembler
