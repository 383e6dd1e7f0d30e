#include "output/point_guard.hpp"

#include "config/registry.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace runner {
namespace {

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr size_t kSignalCount = sizeof kFatalSignals / sizeof kFatalSignals[0];

struct Active {
  pid_t pid = 0;
  PointDeathNote note;
  std::string record_head, record_tail;  // record_json split at the placeholder
  struct sigaction previous[kSignalCount] = {};
  stack_t previous_stack = {};
};

std::atomic<Active*> g_active{nullptr};
// A stack overflow in plugin code still runs the handler, on this stack.
alignas(16) char g_signal_stack[64 * 1024];

void put(int fd, const char* text, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, text, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    text += w;
    n -= static_cast<size_t>(w);
  }
}
void put(int fd, const char* text) { put(fd, text, std::strlen(text)); }
void put(int fd, const std::string& text) { put(fd, text.data(), text.size()); }

// Appends decimal `value` to buf at *at (no allocation: signal context).
void append_int(char* buf, size_t size, size_t* at, long value) {
  char digits[24];
  int n = 0;
  const bool negative = value < 0;
  unsigned long v = negative ? 0UL - static_cast<unsigned long>(value) : static_cast<unsigned long>(value);
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v > 0);
  if (negative && *at + 1 < size) buf[(*at)++] = '-';
  while (n > 0 && *at + 1 < size) buf[(*at)++] = digits[--n];
  buf[*at] = '\0';
}

void append_text(char* buf, size_t size, size_t* at, const char* text) {
  while (*text && *at + 1 < size) buf[(*at)++] = *text++;
  buf[*at] = '\0';
}

// "2026-11-25T09:30:00Z" from the clock alone (gmtime_r is not async-signal-safe).
void utc_now(char out[21]) {
  long t = static_cast<long>(std::time(nullptr));
  const long secs = t % 86400, days = t / 86400;
  // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
  const long z = days + 719468, era = z / 146097, doe = z - era * 146097;
  const long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const long doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
  const long d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9, y = yoe + era * 400 + (m <= 2);
  const long fields[] = {y, m, d, secs / 3600, secs % 3600 / 60, secs % 60};
  const char* separators = "--T::Z";
  size_t at = 0;
  for (int i = 0; i < 6; ++i) {
    if (i > 0 && fields[i] < 10) out[at++] = '0';
    append_int(out, 21, &at, fields[i]);
    out[at++] = separators[i];
  }
  out[at] = '\0';
}

void append_to(const std::string& file, const char* a, const char* b, const char* c, const char* d) {
  if (file.empty()) return;
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return;
  for (const char* part : {a, b, c, d}) put(fd, part);
  ::close(fd);
}

// Records the death of the guarded point, from whichever thread of the process
// ends it (a plugin's worker thread too); false when no point is guarded in
// this process (a forked child shares the memory, not the run).
bool report_death(const char* cause) {
  Active* a = g_active.load();
  if (a == nullptr || getpid() != a->pid) return false;
  if (!g_active.compare_exchange_strong(a, nullptr)) return false;
  const PointDeathNote& n = a->note;
  append_to(n.results_file, a->record_head.c_str(), cause, a->record_tail.c_str(), "\n");
  char now[21];
  utc_now(now);
  append_to(n.log_file, now, " error ", n.label.c_str(), ": ");
  append_to(n.log_file, cause, "\n", "", "");
  append_to(n.note_file, n.label.c_str(), ": ", cause, "\n");
  put(STDERR_FILENO, "runner: ");
  put(STDERR_FILENO, n.label);
  put(STDERR_FILENO, ": ");
  put(STDERR_FILENO, cause);
  put(STDERR_FILENO, n.after);
  put(STDERR_FILENO, "\n");
  return true;
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV (invalid memory access or stack overflow)";
    case SIGBUS: return "SIGBUS (bad memory access)";
    case SIGFPE: return "SIGFPE (arithmetic fault)";
    case SIGILL: return "SIGILL (illegal instruction)";
    case SIGABRT: return "SIGABRT (abort() or a failed assertion)";
    default: return "a fatal signal";
  }
}

void on_fatal_signal(int sig) {
  char cause[160];
  size_t at = 0;
  append_text(cause, sizeof cause, &at, "the process crashed with ");
  append_text(cause, sizeof cause, &at, signal_name(sig));
  append_text(cause, sizeof cause, &at, " during this point");
  report_death(cause);
  // SA_RESETHAND restored the default action; SA_NODEFER lets it take effect now.
  raise(sig);
}

// The cause for an exit-family call; returns the status to exit with (a point
// that ended the process never makes the run a success).
int report_exit(const char* how, int status) {
  if (g_active.load() == nullptr) return status;
  char cause[160];
  size_t at = 0;
  append_text(cause, sizeof cause, &at, "plugin code called ");
  append_text(cause, sizeof cause, &at, how);
  append_text(cause, sizeof cause, &at, "(");
  append_int(cause, sizeof cause, &at, status);
  append_text(cause, sizeof cause, &at, ") during this point, ending the process");
  if (!report_death(cause)) return status;
  std::fflush(nullptr);
  return status == 0 ? 1 : status;
}

template <typename Fn>
Fn next_definition(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

}  // namespace

bool record_point_death(const std::string& cause) { return report_death(cause.c_str()); }

void exit_now(int code) {
  delete g_active.exchange(nullptr);
  syscall(SYS_exit_group, code);
  __builtin_unreachable();
}

PointGuard::PointGuard(const PointDeathNote& note) {
  auto* a = new Active;
  a->pid = getpid();
  a->note = note;
  const size_t cut = note.record_json.find(kDeathPlaceholder);
  a->record_head = note.record_json.substr(0, cut);
  if (cut != std::string::npos) a->record_tail = note.record_json.substr(cut + std::strlen(kDeathPlaceholder));
  stack_t stack{};
  stack.ss_sp = g_signal_stack;
  stack.ss_size = sizeof g_signal_stack;
  sigaltstack(&stack, &a->previous_stack);
  struct sigaction action {};
  action.sa_handler = on_fatal_signal;
  action.sa_flags = SA_RESETHAND | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (size_t i = 0; i < kSignalCount; ++i) sigaction(kFatalSignals[i], &action, &a->previous[i]);
  g_active.store(a);
}

PointGuard::~PointGuard() {
  Active* a = g_active.exchange(nullptr);
  if (a == nullptr) return;
  for (size_t i = 0; i < kSignalCount; ++i) sigaction(kFatalSignals[i], &a->previous[i], nullptr);
  sigaltstack(&a->previous_stack, nullptr);
  delete a;
}

}  // namespace runner

// The exit family, ahead of libc's in the lookup order (see the header).
extern "C" {

__attribute__((visibility("default"))) void exit(int status) noexcept {
  if (runner::in_plugin_probe()) syscall(SYS_exit_group, status);
  status = runner::report_exit("exit", status);
  static const auto real = runner::next_definition<void (*)(int)>("exit");
  real(status);
  __builtin_unreachable();
}

__attribute__((visibility("default"))) void quick_exit(int status) noexcept {
  if (runner::in_plugin_probe()) syscall(SYS_exit_group, status);
  status = runner::report_exit("quick_exit", status);
  static const auto real = runner::next_definition<void (*)(int)>("quick_exit");
  real(status);
  __builtin_unreachable();
}

__attribute__((visibility("default"))) void _exit(int status) {
  status = runner::report_exit("_exit", status);
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}

__attribute__((visibility("default"))) void _Exit(int status) noexcept {
  status = runner::report_exit("_Exit", status);
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}

}  // extern "C"
