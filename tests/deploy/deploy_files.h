#pragma once
// What the tests of the files under deploy/ share: reading them, running the tools that check
// them, and what the built programs need at run time.

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tessera::deploy_test {

namespace fs = std::filesystem;

inline const fs::path kRepo = TSR_SOURCE_DIR;
inline const fs::path kDeploy = kRepo / "deploy";

std::string ReadFile(const fs::path& path);

// The regular files under `dir` (recursively) whose name ends in `extension`, sorted.
std::vector<fs::path> FilesIn(const fs::path& dir, const std::string& extension);

// A fresh directory under the test's temporary directory; empty on failure.
std::string MakeTempDir(const std::string& name);

struct CommandResult {
  int code = -1;       // exit status; -1 when the command could not run or was killed
  std::string output;  // stdout and stderr
};
// Runs `command` through /bin/sh.
CommandResult RunCommand(const std::string& command);
// `s` as one single-quoted shell word.
std::string Quote(const std::string& s);
bool OnPath(const std::string& tool);

// Every document of `text`; a parse error fails the calling test (naming `what`) and yields none.
std::vector<YAML::Node> LoadAll(const std::string& text, const std::string& what);
// The node at `path` below `node` (map keys), or an undefined node; never throws.
YAML::Node At(const YAML::Node& node, std::initializer_list<const char*> path);
// The scalar at `path`, or "" when there is none.
std::string Scalar(const YAML::Node& node, std::initializer_list<const char*> path = {});

// A systemd unit file: "Section.Key" -> its values in order (a key may repeat).
using Unit = std::map<std::string, std::vector<std::string>>;
Unit ParseUnit(const std::string& text);
// deploy/systemd/<name>
Unit LoadUnit(const std::string& name);
// The last value of `key` ("Section.Key"), or "".
std::string One(const Unit& unit, const std::string& key);

// The Debian packages holding the shared libraries that tessera-worker, tessera-scheduler and
// tessera link against directly, less those every Debian system has (libc6, libstdc++6,
// libgcc-s1). A library no package owns shows as "?<soname>". nullopt, with *why, when
// readelf, ldd or dpkg-query is missing. Computed once.
std::optional<std::set<std::string>> RuntimePackages(std::string* why);

}  // namespace tessera::deploy_test
