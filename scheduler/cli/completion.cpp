// `tessera completion bash|zsh`: a shell completion script generated from the command tree
// itself, so it never falls behind the commands and options the CLI really has.

#include "scheduler/cli/completion.h"

#include <map>
#include <sstream>

namespace tessera::cli {

namespace {

// Every command path ("", "token", "token create", ...) -> the words that may follow it.
void Collect(CLI::App& app, const std::string& path, std::map<std::string, std::string>* words) {
  std::string& mine = (*words)[path];
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    mine += sub->get_name() + " ";
    Collect(*sub, path.empty() ? sub->get_name() : path + " " + sub->get_name(), words);
  }
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) mine += "--" + name + " ";
    for (const std::string& name : option->get_snames()) mine += "-" + name + " ";
  }
}

}  // namespace

std::string BashCompletion(CLI::App& app) {
  std::map<std::string, std::string> words;
  Collect(app, "", &words);
  std::ostringstream out;
  out << "# tessera completion for bash (and zsh with bashcompinit). Load it with:\n"
         "#   source <(tessera completion bash)\n"
         "_tessera_complete() {\n"
         "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" path=\"\" w words\n"
         "  for w in \"${COMP_WORDS[@]:1:COMP_CWORD-1}\"; do\n"
         "    case \"${path:+$path }$w\" in\n";
  for (const auto& [path, unused] : words) {
    if (!path.empty()) out << "      \"" << path << "\") path=\"" << path << "\" ;;\n";
  }
  out << "    esac\n"
         "  done\n"
         "  case \"$path\" in\n";
  for (const auto& [path, list] : words) {
    out << "    \"" << path << "\") words=\"" << list << "\" ;;\n";
  }
  out << "  esac\n"
         "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
         "}\n"
         "complete -o default -F _tessera_complete tessera\n";
  return out.str();
}

std::string ZshCompletion(CLI::App& app) {
  return "# tessera completion for zsh. Load it with:\n"
         "#   source <(tessera completion zsh)\n"
         "autoload -U +X bashcompinit && bashcompinit\n" +
         BashCompletion(app);
}

}  // namespace tessera::cli
