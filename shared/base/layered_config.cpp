#include "shared/base/layered_config.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "shared/base/yaml_util.h"

namespace tessera::config {

StatusOr<YAML::Node> LoadLayered(const std::string& path, const std::vector<std::string>& sections,
                                 char** environ_vars, EnvironmentOverrides* overrides) {
  YAML::Node root(YAML::NodeType::Map);
  if (!path.empty()) {
    std::ifstream in(path);
    if (!in) return Status::NotFound("config file " + path + " cannot be read");
    std::stringstream buf;
    buf << in.rdbuf();
    TSR_ASSIGN_OR_RETURN(YAML::Node loaded, yaml::Parse(buf.str(), path));
    if (loaded.IsDefined() && !loaded.IsNull()) {
      if (!loaded.IsMap()) return Status::InvalidArgument(path + ": expected a map of sections");
      root = loaded;
    }
  }
  for (char** e = environ_vars; e && *e; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq == std::string::npos || entry.rfind("TESSERA_", 0) != 0) continue;
    std::string name = entry.substr(8, eq - 8);
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    for (const std::string& section : sections) {
      if (name.size() > section.size() + 1 && name.rfind(section + "_", 0) == 0) {
        const std::string field = name.substr(section.size() + 1);
        root[section][field] = entry.substr(eq + 1);
        if (overrides) (*overrides)[section + "." + field] = entry.substr(0, eq);
      }
    }
  }
  return root;
}

Status NameEnvironmentOverride(const Status& status, const EnvironmentOverrides& overrides) {
  if (status.ok()) return status;
  const std::string& message = status.message();
  for (const auto& [field, variable] : overrides) {
    if (message.rfind(field + ":", 0) == 0) {
      return Status(status.code(),
                    field + " (set by $" + variable + ")" + message.substr(field.size()));
    }
  }
  return status;
}

Status ParseHostPort(const std::string& text, const std::string& field, std::string* host,
                     int* port) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    return Status::InvalidArgument(field + ": expected HOST:PORT, got '" + text + "'");
  }
  std::string h = text.substr(0, colon);
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  std::string p = text.substr(colon + 1);
  if (!std::all_of(p.begin(), p.end(), [](unsigned char c) { return std::isdigit(c); }) ||
      p.size() > 5 || std::stoi(p) > 65535) {
    return Status::InvalidArgument(field + ": port '" + p + "' is not in 0..65535");
  }
  *host = h;
  *port = std::stoi(p);
  return Status::Ok();
}

bool IsLocalEndpoint(const std::string& endpoint) {
  if (endpoint.rfind("ipc://", 0) == 0 || endpoint.rfind("inproc://", 0) == 0) return true;
  if (endpoint.rfind("tcp://", 0) != 0) return false;
  std::string host = endpoint.substr(6);
  if (!host.empty() && host[0] == '[') {
    return host.rfind("[::1]:", 0) == 0;
  }
  return IsLoopbackHost(host.substr(0, host.rfind(':')));
}

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

}  // namespace tessera::config
