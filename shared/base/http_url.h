#pragma once
// http(s) URLs a daemon calls out to (a cloud's metadata service, a webhook receiver): split into
// the origin cpp-httplib's Client takes and the path, or refused.

#include <string>

#include "shared/base/status.h"

namespace tessera::http_url {

// "https://host:8443/a/b?c" -> origin "https://host:8443", path "/a/b?c" ("/" when none). False
// for anything but http:// or https:// with a host (no spaces, '?', '#' or '@' in it: no
// credentials in the URL).
bool Split(const std::string& url, std::string* origin, std::string* path);

// Ok for an empty URL or one Split accepts; else an error naming `field`.
Status Check(const std::string& field, const std::string& url);

}  // namespace tessera::http_url
