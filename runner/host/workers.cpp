#include "workers.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>

#include <torch/cuda.h>

#include "errors.hpp"
#include "execute.hpp"
#include "interrupt.hpp"
#include "point_record.hpp"
#include "runner/stored_record.hpp"

extern char** environ;

namespace runner {
namespace fs = std::filesystem;
namespace {

constexpr int kReplyFd = 3;

bool write_all(int fd, const std::string& text) {
  const char* at = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, at, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    at += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

// The worker's command line: the run's own, without what only the parent does
// (its directory, resume, reports, history, the pool) and with the worker's place.
std::vector<std::string> worker_argv(const std::vector<std::string>& args, const fs::path& run_dir, int index,
                                     const std::string& device) {
  std::vector<std::string> out = {"runner"};
  const std::set<std::string> dropped = {"--workers", "--gpus", "--out", "-o", "--resume", "--reports", "--history",
                                         "--device"};
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const std::string name = a.substr(0, a.find('='));
    if (dropped.count(name)) {
      if (name == a) ++i;  // its value is the next argument
      continue;
    }
    out.push_back(a);
  }
  for (const std::string& a : {std::string("--history"), std::string("off"), std::string("--device"), device,
                               std::string("--worker-of"), run_dir.string(), std::string("--worker-index"),
                               std::to_string(index)})
    out.push_back(a);
  return out;
}

struct Worker {
  int index = 0;
  int gpu = -1;
  pid_t pid = -1;
  int command_fd = -1;  // we write positions
  int reply_fd = -1;    // it writes "done"
  fs::path dir;
  std::uintmax_t offset = 0;  // of its results.jsonl, read so far
  long long current = -1;     // the position in flight
  std::string pending;        // reply bytes not yet a whole line
};

void spawn(Worker& w, const std::vector<std::string>& argv) {
  int command[2], reply[2];
  if (::pipe2(command, O_CLOEXEC) != 0 || ::pipe2(reply, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("--workers: pipe failed: ") + std::strerror(errno));
  std::vector<char*> raw;
  for (const auto& a : argv) raw.push_back(const_cast<char*>(a.c_str()));
  raw.push_back(nullptr);
  // The child's environment, made before fork: between fork and exec only system calls
  // (another thread may hold malloc's lock).
  std::vector<std::string> env_text;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    if (w.gpu >= 0 && (entry.rfind("CUDA_VISIBLE_DEVICES=", 0) == 0 || entry.rfind("RUNNER_WORKER_GPU=", 0) == 0))
      continue;
    env_text.push_back(entry);
  }
  if (w.gpu >= 0) {
    env_text.push_back("CUDA_VISIBLE_DEVICES=" + std::to_string(w.gpu));
    env_text.push_back("RUNNER_WORKER_GPU=" + std::to_string(w.gpu));
  }
  std::vector<char*> env;
  for (auto& e : env_text) env.push_back(e.data());
  env.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("--workers: fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlives the run
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);  // the parent's InterruptGuard blocks them
    ::dup2(command[0], 0);
    ::dup2(reply[1], kReplyFd);
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) ::dup2(null, 1);  // the parent prints each point's result
    ::execve("/proc/self/exe", raw.data(), env.data());
    _exit(127);
  }
  ::close(command[0]);
  ::close(reply[1]);
  w.pid = pid;
  w.command_fd = command[1];
  w.reply_fd = reply[0];
}

std::string describe_worker(const Worker& w) {
  return "worker " + std::to_string(w.index) + (w.gpu >= 0 ? " (GPU " + std::to_string(w.gpu) + ")" : "");
}

class Pool {
 public:
  Pool(const ExperimentSpec& exp, const std::vector<Point>& points, const c10::Device& device, RunOutput& run,
       std::vector<size_t> order)
      : exp_(exp), points_(points), device_(device), run_(run), order_(std::move(order)) {}

  // Appends the points ready in sweep order (so tables list rows as a serial run does);
  // `all`: also those after a point still running (the run is stopping).
  void flush(bool all) {
    for (; flushed_ < order_.size() && ready_.count(order_[flushed_]); ++flushed_) append(order_[flushed_]);
    if (all)
      while (!ready_.empty()) append(ready_.begin()->first);
  }

  // Whole points the worker spooled since last read, ready for results.jsonl and the
  // history. Returns the statuses of the points taken.
  std::vector<RecordStatus> collect(Worker& w) {
    std::vector<RecordStatus> statuses;
    std::ifstream in(w.dir / "results.jsonl", std::ios::binary);
    if (!in) return statuses;
    in.seekg(static_cast<std::streamoff>(w.offset));
    std::vector<StoredRecord> group;
    std::uintmax_t consumed = 0, at = 0;
    for (std::string line; std::getline(in, line);) {
      if (in.eof()) break;  // a line still being written
      at += line.size() + 1;
      if (line.empty()) continue;
      StoredRecord r = decode_record(parse_record_line(line));
      const auto marker = r.point_record.value_or(std::make_pair<std::int64_t, std::int64_t>(1, 1));
      if (marker.first == 1) group.clear();
      group.push_back(std::move(r));
      if (marker.first == marker.second) {
        statuses.push_back(group.front().status);
        move_artifacts(w, group.front());
        if (w.current >= 0) ready_[static_cast<size_t>(w.current)].push_back(std::move(group));
        group.clear();
        consumed = at;
      }
    }
    w.offset += consumed;
    return statuses;
  }

  // A point whose worker died before writing it.
  void record_lost(const Worker& w, int code) {
    const Point& p = points_[static_cast<size_t>(w.current)];
    const std::string why = describe_worker(w) + " exited (" +
                            (code >= 128 ? "signal " + std::to_string(code - 128) : "code " + std::to_string(code)) +
                            ") during this point without recording it; see " + (w.dir / "log.txt").string();
    std::vector<StoredRecord> records = {
        point_record(exp_.name, p, RecordStatus::error, why, Record{}, point_params_json(p, device_), worker_env(w))};
    ready_[static_cast<size_t>(w.current)].push_back(std::move(records));
    run_.log.warn(p.part + " " + describe_point(p) + ": error: " + why);
  }

  nlohmann::json worker_env(const Worker& w) const {
    nlohmann::json env = run_.env;
    env["worker"] = w.index;
    if (w.gpu >= 0) env["gpu_index"] = w.gpu;
    return env;
  }

 private:
  void move_artifacts(const Worker& w, const StoredRecord& r) {
    if (!r.point) return;
    const std::string name = r.part + "-" + std::to_string(*r.point);
    std::error_code ec;
    const fs::path from = w.dir / "artifacts" / name;
    if (!fs::exists(from, ec)) return;
    fs::remove_all(run_.dir / "artifacts" / name, ec);  // a resumed point's earlier try
    fs::rename(from, run_.dir / "artifacts" / name, ec);
  }

  void append(size_t position) {
    for (auto& group : ready_[position]) {
      run_.results->append_point(group);
      if (run_.history) run_.history->add_point(group);
    }
    ready_.erase(position);
  }

  const ExperimentSpec& exp_;
  const std::vector<Point>& points_;
  const c10::Device& device_;
  RunOutput& run_;
  std::vector<size_t> order_;  // the positions to run, in sweep order
  size_t flushed_ = 0;         // order_[0, flushed_) are appended
  std::map<size_t, std::vector<std::vector<StoredRecord>>> ready_;  // collected, not yet appended
};

int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace

std::vector<int> parse_gpus(const std::string& text, int available) {
  std::vector<int> gpus;
  const auto bad = [&](const std::string& why) {
    return ConfigError("--gpus '" + text + "': " + why + " (e.g. --gpus all, --gpus 0-3, --gpus 0,2; this host has " +
                       std::to_string(available) + " GPU(s))");
  };
  if (text == "all") {
    for (int g = 0; g < available; ++g) gpus.push_back(g);
    if (gpus.empty()) throw bad("no GPU is visible");
    return gpus;
  }
  std::istringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    const size_t dash = item.find('-');
    int first = 0, last = 0;
    try {
      size_t used = 0;
      first = std::stoi(item.substr(0, dash), &used);
      if (used != (dash == std::string::npos ? item.size() : dash)) throw std::invalid_argument(item);
      last = dash == std::string::npos ? first : std::stoi(item.substr(dash + 1), &used);
      if (dash != std::string::npos && used != item.size() - dash - 1) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw bad("'" + item + "' is not a GPU index or range");
    }
    if (first < 0 || last < first) throw bad("'" + item + "' is not a GPU index or range");
    for (int g = first; g <= last; ++g) {
      if (g >= available) throw bad("GPU " + std::to_string(g) + " does not exist");
      for (int seen : gpus)
        if (seen == g) throw bad("GPU " + std::to_string(g) + " is named twice");
      gpus.push_back(g);
    }
  }
  if (gpus.empty()) throw bad("names no GPU");
  return gpus;
}

PoolResult run_pool(const ExperimentSpec& exp, const std::vector<Point>& points, const c10::Device& device, RunOutput& run,
                    const std::set<std::pair<std::string, int>>& finished, const PoolSpec& spec,
                    const std::function<void()>& render) {
  PoolResult result;
  std::vector<size_t> queue;
  for (size_t i = 0; i < points.size(); ++i)
    if (!finished.count({points[i].part, points[i].index})) queue.push_back(i);
  size_t next = 0, done = 0;
  const size_t total = queue.size();
  Pool pool(exp, points, device, run, queue);
  std::vector<Worker> workers(static_cast<size_t>(std::min<size_t>(static_cast<size_t>(spec.workers), total)));
  InterruptGuard interrupt;
  // Ctrl-C or SIGTERM: every worker records its point in flight as interrupted (they
  // share the terminal's signal; SIGTERM is passed on), then those records join the run.
  std::atomic<bool> stopping{false};
  interrupt.on_interrupt([&](const char* signal_name) {
    stopping = true;
    for (Worker& w : workers)
      if (w.pid > 0) ::kill(w.pid, std::strcmp(signal_name, "SIGINT") == 0 ? SIGINT : SIGTERM);
    for (Worker& w : workers)
      if (w.pid > 0) {
        int status = 0;
        ::waitpid(w.pid, &status, 0);
        pool.collect(w);
      }
    pool.flush(true);
    run.log.warn(std::string("interrupted by ") + signal_name + "; " + run.resume_hint);
    if (render) render();
  });
  // Held except while waiting for the workers, so a signal's note never interleaves a write.
  std::unique_lock<std::mutex> held(interrupt.mutex());
  for (size_t k = 0; k < workers.size(); ++k) {
    Worker& w = workers[k];
    w.index = static_cast<int>(k);
    w.gpu = spec.gpus.empty() ? -1 : spec.gpus[k];
    w.dir = run.dir / "workers" / std::to_string(k);
    fs::create_directories(w.dir / "artifacts");
    // A resumed run's worker starts a fresh spool: what the last one spooled is either in
    // results.jsonl already or runs again.
    fs::remove(w.dir / "results.jsonl");
    spawn(w, worker_argv(spec.args, run.dir, w.index, device.is_cuda() ? "cuda" : "cpu"));
  }
  const auto assign = [&](Worker& w) {
    if (next < queue.size()) {
      w.current = static_cast<long long>(queue[next++]);
      if (write_all(w.command_fd, std::to_string(w.current) + "\n")) return;
    }
    w.current = -1;
    ::close(w.command_fd);  // no more points: the worker's loop ends
    w.command_fd = -1;
  };
  const auto report = [&](const Worker& w, size_t position, RecordStatus status) {
    ++done;
    if (status == RecordStatus::error || status == RecordStatus::timeout || status == RecordStatus::invalid)
      ++result.failures;
    const Point& p = points[position];
    std::cout << "[" << done << "/" << total << "] " << p.part << " " << describe_point(p) << "  "
              << status_name(status) << "  (" << describe_worker(w) << ")" << std::endl;
  };
  run.log.info("running " + std::to_string(total) + " points on " + std::to_string(workers.size()) + " workers");
  for (Worker& w : workers) assign(w);
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Worker*> owners;
    for (Worker& w : workers)
      if (w.reply_fd >= 0) {
        fds.push_back({w.reply_fd, POLLIN, 0});
        owners.push_back(&w);
      }
    if (fds.empty()) break;
    held.unlock();  // a signal's handler may run while we wait
    const int ready = ::poll(fds.data(), fds.size(), -1);
    held.lock();
    if (stopping) {  // the signal's handler collected everything and ends the process
      held.unlock();
      for (;;) ::pause();
    }
    if (ready < 0 && errno == EINTR) continue;
    for (size_t f = 0; f < fds.size(); ++f) {
      if (!fds[f].revents) continue;
      Worker& w = *owners[f];
      char buf[256];
      const ssize_t n = ::read(w.reply_fd, buf, sizeof buf);
      if (n > 0) {
        w.pending.append(buf, static_cast<size_t>(n));
        for (size_t nl; (nl = w.pending.find('\n')) != std::string::npos;) {
          w.pending.erase(0, nl + 1);
          const auto position = static_cast<size_t>(w.current);
          for (RecordStatus status : pool.collect(w)) report(w, position, status);
          pool.flush(false);
          assign(w);
        }
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      // The worker ended: after its last point (its stdin closed), or died mid-point.
      int status = 0;
      ::waitpid(w.pid, &status, 0);
      w.pid = -1;
      ::close(w.reply_fd);
      w.reply_fd = -1;
      if (w.command_fd >= 0) ::close(w.command_fd);
      w.command_fd = -1;
      if (w.current >= 0) {
        const auto position = static_cast<size_t>(w.current);
        const auto statuses = pool.collect(w);  // what it wrote itself (a timeout, a death note)
        if (statuses.empty()) {
          pool.record_lost(w, exit_code_of(status));
          report(w, position, RecordStatus::error);
        }
        for (RecordStatus s : statuses) report(w, position, s);
        pool.flush(false);
        w.current = -1;
      }
    }
  }
  pool.flush(true);
  if (done < total) {
    run.log.warn(std::to_string(total - done) + " point(s) not run: every worker ended; " + run.resume_hint);
    result.failures += static_cast<int>(total - done);
  }
  return result;
}

PoolSpec pool_spec(const RunOptions& options, const c10::Device& device, bool launched) {
  PoolSpec spec;
  if (options.workers < 0 && options.gpus.empty()) return spec;
  if (launched) throw ConfigError("--workers/--gpus: not for a multi-process run (runner launch, torchrun, srun)");
  if (!options.gpus.empty()) {
    if (options.workers >= 0) throw ConfigError("--workers and --gpus: give one (--gpus starts one worker per GPU)");
    if (!device.is_cuda())
      throw ConfigError("--gpus " + options.gpus + ": the run is on " + device.str() +
                        "; use --workers N for CPU workers");
    spec.gpus = parse_gpus(options.gpus, static_cast<int>(torch::cuda::device_count()));
    spec.workers = static_cast<int>(spec.gpus.size());
  } else {
    if (options.workers < 1 || options.workers > 256)
      throw ConfigError("--workers " + std::to_string(options.workers) + ": expected 1 to 256 worker processes");
    // Two measured points on one GPU would slow each other down: one worker per GPU.
    if (device.is_cuda())
      throw ConfigError("--workers: the run is on cuda; use --gpus LIST|all (one worker per GPU) or --device cpu");
    spec.workers = options.workers;
  }
  spec.args = options.args;
  return spec;
}


bool WorkerChannel::take(std::size_t position) {
  if (ran_) finish();
  if (next_ < 0) {
    std::string line;
    char c = 0;
    ssize_t n = 0;
    while ((n = ::read(0, &c, 1)) == 1 && c != '\n') line += c;
    next_ = line.empty() ? LLONG_MAX : std::stoll(line);
  }
  if (static_cast<long long>(position) != next_) return false;
  next_ = -1;
  ran_ = true;
  return true;
}

void WorkerChannel::finish() {
  if (!ran_) return;
  ran_ = false;
  write_all(kReplyFd, "done\n");
}

}  // namespace runner
