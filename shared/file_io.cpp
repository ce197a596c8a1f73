#include "shared/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace tessera::file_io {
namespace {

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

Status WriteAtomically(const std::string& path, const std::vector<std::string_view>& pieces,
                       mode_t mode) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Status::Internal("cannot create " + tmp + ": " + std::strerror(errno));
  bool ok = true;
  for (std::string_view piece : pieces) ok = ok && WriteAll(fd, piece);
  ok = ok && ::fsync(fd) == 0;
  const int saved_errno = errno;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(ok ? errno : saved_errno);
    ::unlink(tmp.c_str());
    return Status::Internal("cannot write " + path + ": " + why);
  }
  return Status::Ok();
}

Status MakePrivateDirectory(const std::string& dir) {
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(dir).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (::mkdir(dir.c_str(), 0700) != 0 && (errno != EEXIST || ::chmod(dir.c_str(), 0700) != 0)) {
    return Status::Internal("cannot create " + dir + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

StatusOr<std::string> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot open " + path);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return Status::Internal("cannot read " + path);
  return data;
}

}  // namespace tessera::file_io
