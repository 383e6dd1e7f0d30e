// Reading an experiment file into one YAML document, before anything is applied to
// it: the file checks (a regular file of a few KiB), UTF-8, the YAML parse, repeated
// keys and size bounds, the top-level keys, and `include:` (maps merge key by key,
// lists of named entries entry by entry).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/validate.hpp"

namespace runner {

// The document of an experiment file with its includes merged in.
struct ExperimentDocument {
  std::filesystem::path file;
  YAML::Node document;
  SourceMap source;
};

// Reads `file` (ConfigError naming it when missing, a directory, unreadable or not UTF-8).
ExperimentDocument load_document(const std::filesystem::path& file);
// The same from the file's text; `file` names it in messages and anchors its includes.
ExperimentDocument load_document_text(const std::string& text, const std::filesystem::path& file);

// The YAML document in `file` (e.g. a run's stored config.yaml); an unreadable file or a
// syntax error is one ConfigError naming the file (and line:column).
YAML::Node load_yaml_file(const std::filesystem::path& file);

// Experiment and include files are YAML of a few KiB: a larger one (or /dev/zero) is
// refused before it is read, and so is anything but a regular file (a FIFO hangs).
inline constexpr std::uintmax_t kMaxExperimentFileBytes = 16u << 20;
void check_experiment_file(const std::filesystem::path& file);

// Bounds of a document: an alias inside its own anchor is a cycle every recursive
// reader would follow forever, and a dotted path deeper than this names nothing.
inline constexpr size_t kMaxDocumentDepth = 64;

// Throws ConfigError on a repeated key (yaml-cpp keeps both and lookups see only the
// first), a key that is not a plain name, more than 200000 nodes or more than
// kMaxDocumentDepth levels. `visited` counts nodes across calls.
void reject_duplicate_keys(const YAML::Node& node, const SourceMap& src, const std::string& where,
                           size_t& visited, size_t depth = 0);
// Throws ConfigError unless `map` is a map whose keys are all in `valid` (the closest
// one suggested). `where` is the dotted path of `map` ("" at the top).
void check_keys(const YAML::Node& map, const std::vector<std::string>& valid, const SourceMap& src,
                const std::string& where);
void check_top_level_keys(const ExperimentDocument& doc);

// Offset of the first byte that is not part of well-formed UTF-8, or npos.
size_t first_invalid_utf8(const std::string& text);

// A deep copy that shares no node, so emitting it writes every value where it is
// used instead of YAML anchors and aliases (&1, *1).
YAML::Node plain_copy(const YAML::Node& node);
// The resolved document as it is stored in a run's config.yaml (no anchors).
std::string resolved_text(const YAML::Node& document);
// The first lines of config.yaml: "# resolved from <file>[ with --smoke]", and
// whether such a first line says --smoke.
std::string config_header(const std::filesystem::path& experiment_file, bool smoke);
bool config_header_marks_smoke(const std::string& first_line);

// Throws ConfigError unless `text` is usable as one directory name (no '/', '..',
// absolute paths or control characters). `what` starts the message.
void check_path_component(const std::string& text, const std::string& what);

}  // namespace runner
