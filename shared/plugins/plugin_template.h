#pragma once
// The placeholder templates of declarative renderer plugins (plugin.yaml), shared by the parser
// (shared/plugins/plugin_file.cpp, which expands every template once with stand-in values to check
// it) and the argv builder (shared/plugins/plugin_run.cpp, which expands them for one run).
// Internal to those two files; everything else goes through shared/plugins/plugin_file.h.

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "shared/plugins/plugin_file.h"

namespace tessera::plugin::templates {

// Placeholders that exist in every run (tile and GPU ones are filled in when they apply).
const std::set<std::string>& BuiltinNames();
bool HasControl(const std::string& s);
bool IsNumber(const std::string& s);
std::string FormatDouble(double v);

// Looks a placeholder up: nullopt = unknown name (an error); "" with *absent = a setting that has
// no value (the word is left out).
using Lookup = std::function<StatusOr<std::optional<std::string>>(const std::string&)>;

// Expands one template word. Returns nullopt when the word refers to an absent setting.
StatusOr<std::optional<std::string>> Expand(const std::string& tmpl, const Lookup& lookup,
                                            const std::string& field);

// Variables of one run; settings are looked up through `settings`.
struct Vars {
  std::map<std::string, std::string> builtin;
  const Settings* settings = nullptr;
  const PluginSpec* plugin = nullptr;
  const std::string* task_dir = nullptr;
  std::optional<std::string> value;  // {value} inside a setting's args
};

StatusOr<std::optional<std::string>> LookupVar(const Vars& vars, const std::string& name);
// A path setting's value may use the frame placeholders; it becomes an absolute path.
StatusOr<std::optional<std::string>> ExpandPathValue(const Vars& vars, const std::string& value,
                                                     const std::string& field);
// Appends the expansion of `word` (a list setting spliced as several words).
Status AppendWord(const Vars& vars, const std::string& word, const std::string& field,
                  std::vector<std::string>* argv);
// The variables of one run of `plugin`; *tile says whether the run renders a tile.
Vars MakeVars(const PluginSpec& plugin, const RunContext& ctx, bool* tile);

}  // namespace tessera::plugin::templates
