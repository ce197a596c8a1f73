#pragma once
// Daemon configuration: a YAML file of sections, each a map of keys, overridable per key from the
// environment as TESSERA_<SECTION>_<KEY> (e.g. TESSERA_BROKER_HEARTBEAT_MS=500). Each daemon
// parses the merged document into its own plain struct with yaml::MapReader, so unknown keys are
// errors there. Command-line flags override both.

#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <vector>

#include "shared/base/status.h"

namespace tessera::config {

// Which environment variable set each overridden field: "broker.heartbeat_ms" ->
// "TESSERA_BROKER_HEARTBEAT_MS".
using EnvironmentOverrides = std::map<std::string, std::string>;

// Loads `path` (empty: no file) and applies environment overrides for the given sections,
// recording each in `overrides` when given. A missing file that was asked for explicitly is an
// error.
StatusOr<YAML::Node> LoadLayered(const std::string& path, const std::vector<std::string>& sections,
                                 char** environ_vars, EnvironmentOverrides* overrides = nullptr);

// A field's error names the variable that set it, when the environment did ("openjd.x (set by
// $TESSERA_OPENJD_X): unknown field ..."), so a stray variable is found without reading the file.
Status NameEnvironmentOverride(const Status& status, const EnvironmentOverrides& overrides);

// Splits "host:port" (port 0..65535). "[::1]:80" is accepted too.
Status ParseHostPort(const std::string& text, const std::string& field, std::string* host,
                     int* port);

// Whether a ZeroMQ endpoint stays on this machine: ipc://, inproc://, or tcp:// to a loopback
// address (127.0.0.0/8, ::1, localhost). Unencrypted worker links are allowed only there.
bool IsLocalEndpoint(const std::string& endpoint);
// Whether a host name or address is this machine's loopback (127.0.0.0/8, ::1, localhost).
bool IsLoopbackHost(const std::string& host);

}  // namespace tessera::config
