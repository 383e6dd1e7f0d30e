// runner: the command users type. The history verbs (history, compare, schedule, bisect, ab)
// run here, in a binary that does not link LibTorch: loading libtorch_cpu and its
// static registrations costs about two seconds, more than a whole compare of two
// 10,000-point runs. Every other command (a run, launch, list, plugins, describe,
// report, --help, --version) is exec'd, arguments untouched and in the same
// process, into runner-torch, the LibTorch-linked host.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "history/cli.hpp"

namespace fs = std::filesystem;

namespace {

constexpr const char* kTorchHost = "runner-torch";

// Where the LibTorch host lives: beside this binary (the build directory, or an
// install that keeps both in bin/), else in ../libexec/runner/. The path of this
// binary comes from /proc/self/exe, so a symlink to runner or a PATH lookup still
// finds the real directory.
fs::path self_path() {
  std::error_code ec;
  fs::path self = fs::canonical("/proc/self/exe", ec);
  return ec ? fs::path() : self;
}

fs::path find_torch_host(const fs::path& self, std::vector<fs::path>& tried) {
  const fs::path dir = self.parent_path();
  for (const fs::path& candidate : {dir / kTorchHost, dir.parent_path() / "libexec" / "runner" / kTorchHost}) {
    tried.push_back(candidate);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

int history_verb(const std::string& verb, const std::vector<std::string>& rest, const fs::path& self) {
  try {
    if (verb == "history") return runner::history::history_command(rest);
    if (verb == "compare") return runner::history::compare_command(rest);
    if (verb == "bisect") return runner::history::bisect_command(rest, self.string());
    if (verb == "ab") return runner::history::ab_command(rest);
    // Scheduled firings call this binary again (`runner schedule --run NAME`).
    return runner::history::schedule_command(rest, self.string());
  } catch (const std::exception& e) {
    std::cerr << "runner " << verb << ": " << e.what() << "\n";
    return 2;
  }
}

bool is_history_verb(const std::string& s) {
  return s == "history" || s == "compare" || s == "schedule" || s == "bisect" || s == "ab";
}

}  // namespace

int main(int argc, char** argv) {
  const fs::path self = self_path();
  // Own buffering for std::cout: a compare prints 20,000 rows.
  std::ios::sync_with_stdio(false);
  if (argc >= 2 && is_history_verb(argv[1]))
    return history_verb(argv[1], std::vector<std::string>(argv + 2, argv + argc), self);
  // `runner --help compare` is the same as `runner compare --help`.
  if (argc == 3 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) &&
      is_history_verb(argv[2]))
    return history_verb(argv[2], {"--help"}, self);

  std::vector<fs::path> tried;
  const fs::path host = self.empty() ? fs::path() : find_torch_host(self, tried);
  if (host.empty()) {
    std::cerr << "runner: cannot find " << kTorchHost << " (the LibTorch part of runner, needed for `"
              << (argc >= 2 ? argv[1] : "runner") << "`); looked at";
    for (const auto& t : tried) std::cerr << " " << t.string();
    std::cerr << (tried.empty() ? " nothing (/proc/self/exe is unreadable)" : "")
              << ". Build it with `cmake --build build --target runner`, or install both binaries together\n";
    return 127;
  }
  execv(host.c_str(), argv);
  std::cerr << "runner: cannot start " << host.string() << ": " << std::strerror(errno) << "\n";
  return 127;
}
