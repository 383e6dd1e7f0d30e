// task/fault: a point that dies the ways plugin code can take a process down,
// so tests check the host records and names the point instead of lying about the
// run: a segfault, exit()/_exit()/quick_exit() with any status, a throw of
// something that is not a std::exception, and a hang (the host is stopped from
// outside). `at` picks which point faults; the others record normally.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <thread>

#include "runner/task.hpp"

namespace {

struct NotAStdException {
  int code = 7;
};

class Fault : public runner::Task {
 public:
  void run(runner::Context&, const runner::Params& p, runner::Recorder& out) override {
    // RUNNER_FAULT_DISARM: the same configuration runs clean (a resumed run).
    if (p.integer("point") == p.integer("at") && std::getenv("RUNNER_FAULT_DISARM") == nullptr) {
      const std::string how = p.text("fault");
      const int status = static_cast<int>(p.integer("status"));
      if (how == "segfault") std::raise(SIGSEGV);
      if (how == "exit") std::exit(status);
      if (how == "_exit") _exit(status);
      if (how == "quick_exit") std::quick_exit(status);
      if (how == "throw_int") throw 42;
      if (how == "throw_struct") throw NotAStdException{};
      if (how == "hang")
        while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    runner::Record r;
    r.add("value", static_cast<double>(p.integer("point")), "units");
    out.emit(std::move(r));
  }
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Task;
  m.name = "fault";
  m.version = "0";
  m.description = "test task: dies on purpose at one point (segfault, exit, non-std throw, hang)";
  m.options = {
      runner::opt_enum("fault", {"none", "segfault", "exit", "_exit", "quick_exit", "throw_int", "throw_struct", "hang"},
                       "none", "how the point at `at` dies"),
      runner::opt_int("point", 0, "this point's number (sweep it)"),
      runner::opt_int("at", 1, "the point that faults"),
      runner::opt_int("status", 0, "exit status for exit, _exit and quick_exit"),
  };
  m.metrics = std::vector<std::string>{"value"};
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<Fault>();
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
