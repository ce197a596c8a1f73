#include "shared/base/file_io.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "shared/base/disk_space.h"

namespace tessera::file_io {
namespace {

// ".NAME.tmp-PID-N": the PID, or -1 when `name` is not such a name.
pid_t ImageTempPid(const std::string& name) {
  if (name.size() < 2 || name[0] != '.') return -1;
  const size_t dash = name.rfind('-');
  const size_t mark = name.rfind(".tmp-", dash == std::string::npos ? 0 : dash);
  if (dash == std::string::npos || mark == std::string::npos || mark == 0 || mark + 5 >= dash ||
      dash + 1 >= name.size()) {
    return -1;
  }
  auto digits = [](std::string_view s) {
    return !s.empty() && s.size() <= 10 &&
           s.find_first_not_of("0123456789") == std::string_view::npos;
  };
  const std::string_view pid(name.data() + mark + 5, dash - mark - 5);
  if (!digits(pid) || !digits(std::string_view(name).substr(dash + 1))) return -1;
  return static_cast<pid_t>(std::stoll(std::string(pid)));
}

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
  if (fd < 0 && disk_space::IsFullErrno(errno)) return disk_space::FullError("create", tmp, errno);
  if (fd < 0) return Status::Internal("cannot create " + tmp + ": " + std::strerror(errno));
  bool ok = true;
  for (std::string_view piece : pieces) ok = ok && WriteAll(fd, piece);
  ok = ok && ::fsync(fd) == 0;
  const int saved_errno = errno;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = ok ? errno : saved_errno;
    ::unlink(tmp.c_str());
    // A short write with no errno (write returned 0) on a full disk is ENOSPC in all but name.
    if (disk_space::IsFullErrno(err)) return disk_space::FullError("write", path, err);
    return disk_space::ClassifyWriteFailure(
        Status::Internal("cannot write " + path + ": " + std::strerror(err)), path, 0);
  }
  return Status::Ok();
}

Status MakePrivateDirectory(const std::string& dir) {
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(dir).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (::mkdir(dir.c_str(), 0700) != 0 && (errno != EEXIST || ::chmod(dir.c_str(), 0700) != 0)) {
    if (disk_space::IsFullErrno(errno)) return disk_space::FullError("create", dir, errno);
    return Status::Internal("cannot create " + dir + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

std::vector<std::string> RemoveLeftoverTempFiles(const std::string& root) {
  namespace fs = std::filesystem;
  std::vector<std::string> removed;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(
           root, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec)) continue;
    const std::string name = it->path().filename().string();
    bool leftover = name.size() > 4 && name.ends_with(".tmp");
    if (const pid_t pid = ImageTempPid(name); pid > 0) {
      // A writer still alive (another process) finishes or removes its own file.
      leftover = pid == ::getpid() || (::kill(pid, 0) != 0 && errno == ESRCH);
    }
    std::error_code rm_ec;
    if (leftover && fs::remove(it->path(), rm_ec)) removed.push_back(it->path().string());
  }
  return removed;
}

StatusOr<std::string> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot open " + path);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return Status::Internal("cannot read " + path);
  return data;
}

StatusOr<std::string> ReadPlainFile(const std::string& path, int64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP) return Status::PermissionDenied(path + " is a link, not a plain file");
    return Status::NotFound("cannot open " + path + ": " + std::strerror(err));
  }
  struct stat st {};
  std::string data;
  Status status = Status::Ok();
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    status = Status::PermissionDenied(path + " is not a plain file");
  } else if (st.st_size > max_bytes) {
    status =
        Status::ResourceExhausted(path + " is " + std::to_string(st.st_size) + " bytes; at most " +
                                  std::to_string(max_bytes) + " are read");
  } else {
    data.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < data.size()) {
      const ssize_t n = ::read(fd, data.data() + got, data.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    if (got != data.size()) status = Status::Internal("cannot read " + path + " whole");
  }
  ::close(fd);
  if (!status.ok()) return status;
  return data;
}

}  // namespace tessera::file_io
