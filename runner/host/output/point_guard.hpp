// What the run writes when plugin code ends the process in the middle of a point:
// a segfault (or abort, bus error, FPE, illegal instruction, stack overflow),
// exit(), _exit(), _Exit() or quick_exit() -- even with status 0, which would
// otherwise pass for a finished run. While a guard is active, the dying thread
// appends an `error` record for the point to results.jsonl, a line naming the
// point to log.txt (and the launcher's note for a rank), and one to stderr; a
// signal is then re-raised (exit code 128 + signal) and an exit status of 0
// becomes 1. Everything is formatted before the point starts, so the signal
// path only calls write(2).
//
// The exit family is caught by defining exit, _exit, _Exit and quick_exit in
// this library (it precedes libc in the lookup order, so plugins' calls land
// here); calls from forked children pass straight on, and the host's own
// deliberate exits (Ctrl-C) go through exit_now().
#pragma once
#include <string>

namespace runner {

struct PointDeathNote {
  std::string results_file;   // results.jsonl to append to; empty on ranks other than 0
  std::string log_file;       // log.txt (or the rank's log)
  std::string note_file;      // the launcher's error note for this rank; empty when not launched
  std::string record_json;    // the point's error record, with kDeathPlaceholder where the cause goes
  std::string label;          // "part[index] params", as log lines name the point
  std::string after;          // appended to the stderr line: where the records are, what next
};

inline constexpr const char* kDeathPlaceholder = "@@POINT_DEATH@@";

// Active from construction to destruction, for every thread of this process.
// Not nestable.
class PointGuard {
 public:
  explicit PointGuard(const PointDeathNote& note);
  ~PointGuard();
  PointGuard(const PointGuard&) = delete;
  PointGuard& operator=(const PointGuard&) = delete;
};

// For a thread that ends the process on the run's behalf (the heartbeat):
// writes the guarded point's record and lines with `cause`; false when no point
// is guarded.
bool record_point_death(const std::string& cause);

// The host ending the process on purpose while a point may be guarded (a
// signal's note is written): no death record, no cleanup.
[[noreturn]] void exit_now(int code);

}  // namespace runner
