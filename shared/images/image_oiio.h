#pragma once
// OpenImageIO pieces shared by shared/images/image_io.cpp and the scheduler's assembler (which
// writes large frames a band of rows at a time): the atomic write and the EXR header. Only code
// that links OpenImageIO includes this; everything else uses shared/images/image_io.h.

#include <OpenImageIO/imageio.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "shared/base/status.h"

namespace tessera::image {

namespace OIIO = OIIO_NAMESPACE;

// Opens the writer the final name's extension picks on a hidden, uniquely named sibling
// ("<dir>/.<name>.tmp-<pid>-<n>"), lets `write` fill it, then renames it over `path`: a reader
// or a crash never sees half a file, and a leftover is never mistaken for a frame.
Status WriteAtomically(const std::string& path, const OIIO::ImageSpec& spec,
                       const std::function<bool(OIIO::ImageOutput&)>& write);

// Opens an image with the reader its extension names, and only that reader: a file it cannot
// open fails as that format (a truncated PNG as a PNG) instead of being offered to every reader
// OpenImageIO has. Movie, volume, camera RAW, DICOM and HEIF files are refused, naming what is
// read: renderers never write them, and the worker bundle leaves their readers' libraries out
// (deploy/bundle/libraries.py). InvalidArgument for a refused format, NotFound otherwise.
StatusOr<std::unique_ptr<OIIO::ImageInput>> OpenForReading(const std::string& path);

// The header of a linear EXR: size, pixel type, channel names (the alpha channel is the one
// named "A"; without names, the fourth of four) and compression ("zip", "zips:3", ...).
StatusOr<OIIO::ImageSpec> ExrSpec(const std::string& path, int width, int height, int channels,
                                  const std::vector<std::string>& channel_names,
                                  OIIO::TypeDesc type, const char* compression);

}  // namespace tessera::image
