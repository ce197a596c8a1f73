#pragma once
// Shell completion scripts for `tessera`, generated from its CLI11 command tree.

#include <CLI/CLI.hpp>
#include <string>

namespace tessera::cli {

std::string BashCompletion(CLI::App& app);
std::string ZshCompletion(CLI::App& app);

}  // namespace tessera::cli
