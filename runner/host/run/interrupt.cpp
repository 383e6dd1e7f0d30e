#include "run/interrupt.hpp"

#include "output/point_guard.hpp"
#include "runner/child_process.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <thread>

namespace runner {
namespace {

// A thread started before the guard (a LibTorch pool) does not block the signals;
// if one of them receives it, pass it on to the watcher (pthread_kill is
// async-signal-safe).
pthread_t watcher_thread;
void forward_to_watcher(int signal_number) { pthread_kill(watcher_thread, signal_number); }

}  // namespace

struct InterruptGuard::Watcher {
  sigset_t signals{};
  sigset_t previous{};
  struct sigaction previous_int {}, previous_term {};
  std::thread thread;
};

InterruptGuard::InterruptGuard() : watcher_(new Watcher) {
  sigemptyset(&watcher_->signals);
  sigaddset(&watcher_->signals, SIGINT);
  sigaddset(&watcher_->signals, SIGTERM);
  sigaddset(&watcher_->signals, SIGUSR2);  // our own wake-up at shutdown
  pthread_sigmask(SIG_BLOCK, &watcher_->signals, &watcher_->previous);
  watcher_->thread = std::thread([this] {
    int signal_number = 0;
    while (sigwait(&watcher_->signals, &signal_number) == 0) {
      if (signal_number == SIGUSR2) return;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (write_note_) write_note_(signal_number == SIGINT ? "SIGINT" : "SIGTERM");
      }
      // A child still running (a PyTorch script) would outlive us holding the GPU.
      end_child_processes(std::chrono::seconds(5));
      // 128 + signal number, as a shell reports a process killed by it.
      exit_now(128 + signal_number);
    }
  });
  watcher_thread = watcher_->thread.native_handle();
  struct sigaction forward {};
  forward.sa_handler = forward_to_watcher;
  sigemptyset(&forward.sa_mask);
  sigaction(SIGINT, &forward, &watcher_->previous_int);
  sigaction(SIGTERM, &forward, &watcher_->previous_term);
}

InterruptGuard::~InterruptGuard() {
  sigaction(SIGINT, &watcher_->previous_int, nullptr);
  sigaction(SIGTERM, &watcher_->previous_term, nullptr);
  pthread_kill(watcher_->thread.native_handle(), SIGUSR2);
  watcher_->thread.join();
  pthread_sigmask(SIG_SETMASK, &watcher_->previous, nullptr);
  delete watcher_;
}

void InterruptGuard::on_interrupt(std::function<void(const char*)> write_note) {
  std::lock_guard<std::mutex> lock(mutex_);
  write_note_ = std::move(write_note);
}

}  // namespace runner
