// What is there to run: plugins (with their options) and the experiments of a
// directory (with descriptions and point counts).
#pragma once
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

namespace runner {

class PluginRegistry;
struct PluginManifest;

// "0.1.0": the project version this runner was built from.
std::string runner_version();

// Columns sized to the longest entry; skipped files after the plugins, with why.
void list_plugins(const PluginRegistry& registry, std::ostream& out);
// `what` is "<kind>/<name>"; returns false if there is no such plugin. With `markdown`
// only the option table of the plugin's README.
bool describe_plugin(const PluginRegistry& registry, const std::string& what, std::ostream& out,
                     bool markdown = false);
// The options as the Markdown table of the plugin's README (option, type, default,
// meaning); "" for a plugin without options. Generated, so README and manifest agree
// (scripts/plugin_readme_tables.py writes it into every README; a test compares).
std::string option_table(const PluginManifest& manifest);
// "; did you mean 'task/train_step'?" for a `what` that names no plugin.
std::string plugin_suggestion(const PluginRegistry& registry, const std::string& what);
// Rows as left-aligned columns two spaces apart; the last column is free text.
void print_columns(const std::vector<std::vector<std::string>>& rows, std::ostream& out);
// One line per *.yaml of `dir` and of its subfolders: file, experiment name, kind
// (question for a file with `question:`, with the id where it is not the file's
// experiment name; other; or study for studies/), points,
// description; questions first, studies last, then a count of each. A file that does
// not load is listed with its error. Returns the number of such files.
int list_experiments(const std::filesystem::path& dir, std::ostream& out);

}  // namespace runner
