#include "shared/base/http_url.h"

namespace tessera::http_url {

bool Split(const std::string& url, std::string* origin, std::string* path) {
  size_t scheme_end = 0;
  if (url.rfind("http://", 0) == 0) {
    scheme_end = 7;
  } else if (url.rfind("https://", 0) == 0) {
    scheme_end = 8;
  } else {
    return false;
  }
  const size_t slash = url.find('/', scheme_end);
  const std::string host = url.substr(scheme_end, slash - scheme_end);
  if (host.empty() || host.find_first_of(" \t?#@") != std::string::npos) return false;
  *origin = url.substr(0, slash);
  *path = slash == std::string::npos ? "/" : url.substr(slash);
  return true;
}

Status Check(const std::string& field, const std::string& url) {
  std::string origin, path;
  if (url.empty() || Split(url, &origin, &path)) return Status::Ok();
  return Status::InvalidArgument(
      field + ": expected http://HOST[:PORT]/PATH or https://..., got '" + url + "'");
}

}  // namespace tessera::http_url
