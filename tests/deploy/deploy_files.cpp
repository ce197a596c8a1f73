#include "tests/deploy/deploy_files.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

namespace tessera::deploy_test {

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

std::vector<fs::path> FilesIn(const fs::path& dir, const std::string& extension) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == extension) {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string MakeTempDir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/deploy-" + name + "-XXXXXX";
  return mkdtemp(dir.data()) != nullptr ? dir : std::string();
}

CommandResult RunCommand(const std::string& command) {
  CommandResult r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[512];
  while (fgets(buf, sizeof(buf), pipe) != nullptr) r.output += buf;
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  return q + "'";
}

bool OnPath(const std::string& tool) {
  return RunCommand("command -v " + Quote(tool) + " >/dev/null").code == 0;
}

std::vector<YAML::Node> LoadAll(const std::string& text, const std::string& what) {
  try {
    return YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    ADD_FAILURE() << what << ": " << e.what();
    return {};
  }
}

YAML::Node At(const YAML::Node& node, std::initializer_list<const char*> path) {
  YAML::Node current = node;
  for (const char* key : path) {
    if (!current.IsDefined() || !current.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    // The const operator[] only looks; the mutable one would add the key.
    const YAML::Node& map = current;
    YAML::Node child = map[key];
    if (!child.IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
    current.reset(child);
  }
  return current;
}

std::string Scalar(const YAML::Node& node, std::initializer_list<const char*> path) {
  YAML::Node n = At(node, path);
  return n.IsDefined() && n.IsScalar() ? n.Scalar() : std::string();
}

Unit ParseUnit(const std::string& text) {
  Unit unit;
  std::string section, line;
  std::istringstream in(text);
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      section = line.substr(1, line.size() - 2);
    } else if (size_t eq = line.find('='); eq != std::string::npos) {
      unit[section + "." + line.substr(0, eq)].push_back(line.substr(eq + 1));
    }
  }
  return unit;
}

Unit LoadUnit(const std::string& name) { return ParseUnit(ReadFile(kDeploy / "systemd" / name)); }

std::string One(const Unit& unit, const std::string& key) {
  auto it = unit.find(key);
  return it == unit.end() || it->second.empty() ? std::string() : it->second.back();
}

namespace {

// The sonames `binary` names as NEEDED, each with the file the loader resolves it to ("" when
// it resolves to none).
std::map<std::string, std::string> NeededLibraries(const std::string& binary) {
  std::map<std::string, std::string> resolved;  // soname -> file
  std::istringstream ldd(RunCommand("ldd " + Quote(binary)).output);
  const std::regex mapped(R"((\S+) => (/\S+))"), loader(R"(^\s*(/\S+) \()");
  for (std::string line; std::getline(ldd, line);) {
    std::smatch m;
    if (std::regex_search(line, m, mapped)) {
      resolved[m[1]] = m[2];
    } else if (std::regex_search(line, m, loader)) {
      resolved[fs::path(m[1].str()).filename().string()] = m[1];
    }
  }
  std::map<std::string, std::string> needed;
  std::istringstream elf(RunCommand("readelf -d " + Quote(binary)).output);
  const std::regex entry(R"(\(NEEDED\).*\[(.+)\])");
  for (std::string line; std::getline(elf, line);) {
    std::smatch m;
    if (std::regex_search(line, m, entry)) needed[m[1]] = resolved[m[1]];
  }
  return needed;
}

// The spellings dpkg may have recorded a library under: on a merged /usr some packages list
// /lib/..., others /usr/lib/...
std::vector<std::string> Spellings(const std::string& file) {
  if (file.empty()) return {};
  std::error_code ec;
  return {file, fs::canonical(file, ec).string(),
          file.rfind("/usr/", 0) == 0 ? file.substr(4) : "/usr" + file};
}

}  // namespace

std::optional<std::set<std::string>> RuntimePackages(std::string* why) {
  static const std::optional<std::set<std::string>> packages = []() {
    std::optional<std::set<std::string>> result;
    for (const char* tool : {"readelf", "ldd", "dpkg-query"}) {
      if (!OnPath(tool)) return result;
    }
    std::map<std::string, std::string> needed;  // soname -> file
    for (const char* binary : {TSR_WORKER_BIN, TSR_SCHEDULER_BIN, TSR_CLI_BIN}) {
      needed.merge(NeededLibraries(binary));
    }
    // One dpkg-query for every spelling of every file: "libzmq5:amd64: /usr/lib/.../libzmq.so.5".
    std::string query = "dpkg-query -S";
    for (const auto& [soname, file] : needed) {
      for (const std::string& s : Spellings(file)) {
        query += ' ';
        query += Quote(s);
      }
    }
    std::map<std::string, std::string> owners;  // file -> package
    std::istringstream lines(RunCommand(query).output);
    for (std::string line; std::getline(lines, line);) {
      const size_t sep = line.find(": /");
      if (sep != std::string::npos && line.rfind("diversion", 0) != 0) {
        owners[line.substr(sep + 2)] = line.substr(0, line.find_first_of(":,"));
      }
    }
    result.emplace();
    for (const auto& [soname, file] : needed) {
      std::string owner = "?" + soname;
      for (const std::string& s : Spellings(file)) {
        if (owners.count(s)) owner = owners[s];
      }
      result->insert(owner);
    }
    for (const char* base : {"libc6", "libstdc++6", "libgcc-s1"}) result->erase(base);
    return result;
  }();
  if (!packages) *why = "readelf, ldd or dpkg-query is not installed";
  return packages;
}

}  // namespace tessera::deploy_test
