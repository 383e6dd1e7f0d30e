// Shell commands of the history's verbs (schedule installs, bisect's git and build steps).
#pragma once
#include <string>

namespace runner::history {

// `text` as one single-quoted shell word.
std::string shell_quote(const std::string& text);

// Runs `command` with /bin/sh; returns its exit code (-1 when it did not exit) and, when
// `output` is given, its whole stdout.
int run_shell(const std::string& command, std::string* output = nullptr);

}  // namespace runner::history
