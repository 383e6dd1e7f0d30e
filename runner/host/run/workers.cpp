#include "run/workers.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <list>
#include <map>
#include <mutex>
#include <sstream>

#include <torch/cuda.h>

#include "base/errors.hpp"
#include "distributed/distributed.hpp"
#include "run/execute.hpp"
#include "run/interrupt.hpp"
#include "run/point_record.hpp"
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
  int index = 0;           // its (first) slot of the pool: workers/<index>/
  std::vector<int> slots;  // the pool's workers it holds: its own, or a multi-process point's N
  std::vector<int> gpus;   // theirs, on GPUs
  bool group = false;      // a multi-process point's `runner launch`, ending after it
  pid_t pid = -1;
  int command_fd = -1;  // we write positions
  int reply_fd = -1;    // it writes "done"
  fs::path dir;
  std::uintmax_t offset = 0;  // of its results.jsonl, read so far
  long long current = -1;     // the position in flight
  std::string pending;        // reply bytes not yet a whole line
};

std::string joined(const std::vector<int>& values, const char* separator) {
  std::string out;
  for (int v : values) out += (out.empty() ? "" : separator) + std::to_string(v);
  return out;
}

// Starts `argv` as worker `w` with `env` set (NAME=value each, replacing the run's own).
void spawn(Worker& w, const std::vector<std::string>& argv, const std::vector<std::string>& env_set) {
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
    bool replaced = false;
    for (const std::string& set : env_set) replaced = replaced || entry.rfind(set.substr(0, set.find('=') + 1), 0) == 0;
    if (!replaced) env_text.push_back(entry);
  }
  env_text.insert(env_text.end(), env_set.begin(), env_set.end());
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
  if (w.slots.size() > 1)
    return "workers " + joined(w.slots, ", ") + (w.gpus.empty() ? "" : " (GPUs " + joined(w.gpus, ", ") + ")");
  return "worker " + std::to_string(w.index) + (w.gpus.empty() ? "" : " (GPU " + std::to_string(w.gpus[0]) + ")");
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
    if (!w.gpus.empty()) env["gpu_index"] = w.gpus[0];
    if (w.group) {
      env["workers"] = w.slots;
      if (!w.gpus.empty()) env["gpu_indices"] = w.gpus;
    }
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
  const std::vector<int> need = point_processes(exp, points);
  std::vector<size_t> queue;
  for (size_t i = 0; i < points.size(); ++i)
    if (!finished.count({points[i].part, points[i].index})) queue.push_back(i);
  size_t next = 0, done = 0;
  size_t singles_left = 0;  // 1-process points of queue[next, end)
  for (size_t position : queue) singles_left += need[position] == 1;
  const size_t total = queue.size();
  Pool pool(exp, points, device, run, queue);
  std::list<Worker> live;                                              // processes running
  std::vector<Worker*> holder(static_cast<size_t>(spec.workers), nullptr);  // slot -> who holds it
  InterruptGuard interrupt;
  // Ctrl-C or SIGTERM: every worker records its point in flight as interrupted (they
  // share the terminal's signal; SIGTERM is passed on), then those records join the run.
  std::atomic<bool> stopping{false};
  interrupt.on_interrupt([&](const char* signal_name) {
    stopping = true;
    for (Worker& w : live)
      if (w.pid > 0) ::kill(w.pid, std::strcmp(signal_name, "SIGINT") == 0 ? SIGINT : SIGTERM);
    for (Worker& w : live)
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
  const std::string device_name = device.is_cuda() ? "cuda" : "cpu";
  // A slot's own worker, started when a 1-process point first needs it (again after a
  // multi-process point used its slot).
  const auto start_worker = [&](int slot) -> Worker& {
    Worker& w = live.emplace_back();
    w.index = slot;
    w.slots = {slot};
    if (!spec.gpus.empty()) w.gpus = {spec.gpus[static_cast<size_t>(slot)]};
    w.dir = run.dir / "workers" / std::to_string(slot);
    fs::create_directories(w.dir / "artifacts");
    // A fresh spool: what an earlier worker of this slot (or of a resumed run) spooled is
    // in results.jsonl already or runs again.
    fs::remove(w.dir / "results.jsonl");
    std::vector<std::string> env;
    if (!w.gpus.empty())
      env = {"CUDA_VISIBLE_DEVICES=" + std::to_string(w.gpus[0]), "RUNNER_WORKER_GPU=" + std::to_string(w.gpus[0])};
    spawn(w, worker_argv(spec.args, run.dir, slot, device_name), env);
    holder[static_cast<size_t>(slot)] = &w;
    return w;
  };
  // A multi-process point on `slots`: `runner launch` of its ranks, which run only it.
  const auto start_group = [&](const std::vector<int>& slots, size_t position) {
    Worker& w = live.emplace_back();
    w.index = slots.front();
    w.slots = slots;
    w.group = true;
    for (int slot : slots)
      if (!spec.gpus.empty()) w.gpus.push_back(spec.gpus[static_cast<size_t>(slot)]);
    w.dir = run.dir / "workers" / ("point-" + std::to_string(position));
    fs::create_directories(w.dir / "artifacts");
    // As a worker's: a fresh spool, its log appended to. (Not fs::remove_all: libtorch.so
    // exports an incompatible copy of it that may be bound here, and it crashed.)
    fs::remove(w.dir / "results.jsonl");
    std::vector<std::string> argv = worker_argv(spec.args, run.dir, w.index, device_name);
    argv.insert(argv.begin() + 1, {"launch", "--nproc-per-node", std::to_string(slots.size())});
    std::vector<std::string> env = {"RUNNER_WORKER_POINT=" + std::to_string(position),
                                    "RUNNER_WORKER_SLOTS=" + joined(slots, ",")};
    if (!w.gpus.empty()) {
      env.push_back("CUDA_VISIBLE_DEVICES=" + joined(w.gpus, ","));
      env.push_back("RUNNER_WORKER_GPUS=" + joined(w.gpus, ","));
    }
    spawn(w, argv, env);
    ::close(w.command_fd);  // its ranks take their point from RUNNER_WORKER_POINT
    w.command_fd = -1;
    w.current = static_cast<long long>(position);
    for (int slot : slots) holder[static_cast<size_t>(slot)] = &w;
  };
  const auto idle = [](const Worker* w) { return w && !w->group && w->current < 0 && w->command_fd >= 0; };
  // No more points for this worker: closing its stdin ends its loop, and it exits.
  const auto retire = [](Worker& w) {
    if (w.command_fd >= 0) ::close(w.command_fd);
    w.command_fd = -1;
  };
  // Points start in sweep order, each once as many workers as it needs are free
  // (a multi-process point: also ended, so its GPUs hold no other process's memory).
  // First come, first served, without backfilling: a point waiting for N free workers
  // holds back every point after it. Nothing knows how long a point runs, so letting
  // 1-process points start in front of a waiting N-process one could keep one of its N
  // workers busy again and again, and it could wait forever; this way it waits at most
  // for the points already running. The price: while it waits, freed workers sit idle.
  const auto schedule = [&] {
    while (next < queue.size()) {
      const size_t position = queue[next];
      const int n = need[position];
      // The free slots it gets, lowest first: for one process a started worker before an
      // empty slot; for several, empty slots before workers that must end first.
      std::vector<int> chosen;
      for (int pass = 0; pass < 2; ++pass) {
        const bool idle_pass = (pass == 0) == (n == 1);
        for (size_t k = 0; k < holder.size() && static_cast<int>(chosen.size()) < n; ++k)
          if (idle_pass ? idle(holder[k]) : holder[k] == nullptr) chosen.push_back(static_cast<int>(k));
      }
      if (static_cast<int>(chosen.size()) < n) return;
      if (n == 1) {
        Worker& w = holder[static_cast<size_t>(chosen[0])] ? *holder[static_cast<size_t>(chosen[0])] : start_worker(chosen[0]);
        w.current = static_cast<long long>(position);
        // A worker that died before it could take the point costs the point (an error record
        // once its reply pipe closes), not a new worker for it again and again.
        if (!write_all(w.command_fd, std::to_string(position) + "\n")) retire(w);
        --singles_left;
      } else {
        bool waiting = false;
        for (int slot : chosen)
          if (Worker* w = holder[static_cast<size_t>(slot)]) {
            retire(*w);
            waiting = true;
          }
        if (waiting) return;  // once those workers have exited
        std::sort(chosen.begin(), chosen.end());
        start_group(chosen, position);
      }
      ++next;
    }
    if (singles_left == 0)
      for (Worker& w : live)
        if (idle(&w)) retire(w);
  };
  const auto report = [&](const Worker& w, size_t position, RecordStatus status) {
    ++done;
    if (status == RecordStatus::error || status == RecordStatus::timeout || status == RecordStatus::invalid)
      ++result.failures;
    const Point& p = points[position];
    std::cout << "[" << done << "/" << total << "] " << p.part << " " << describe_point(p) << "  "
              << status_name(status) << "  (" << describe_worker(w) << ")" << std::endl;
  };
  run.log.info("running " + std::to_string(total) + " points on " + std::to_string(spec.workers) + " workers");
  schedule();
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Worker*> owners;
    for (Worker& w : live)
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
          if (w.current < 0) continue;
          const auto position = static_cast<size_t>(w.current);
          for (RecordStatus status : pool.collect(w)) report(w, position, status);
          pool.flush(false);
          w.current = -1;
        }
        schedule();
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      // The worker ended: after its last point (its stdin closed), or died mid-point.
      int status = 0;
      ::waitpid(w.pid, &status, 0);
      w.pid = -1;
      ::close(w.reply_fd);
      w.reply_fd = -1;
      retire(w);
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
      for (int slot : w.slots)
        if (holder[static_cast<size_t>(slot)] == &w) holder[static_cast<size_t>(slot)] = nullptr;
      live.remove_if([&](const Worker& x) { return &x == &w; });
      schedule();
    }
  }
  pool.flush(true);
  if (done < total) {
    run.log.warn(std::to_string(total - done) + " point(s) not run: every worker ended; " + run.resume_hint);
    result.failures += static_cast<int>(total - done);
  }
  return result;
}

namespace {

int checked_processes(int n, const std::string& where, const std::string& key) {
  if (n < 1) throw ConfigError(where + ": " + key + ": expected an integer >= 1");
  return n;
}

// Where the part's process count comes from, for messages: "x.yaml:9:5: parts.pair.processes: 2".
std::string processes_said(const ExperimentSpec& exp, const std::string& part, int n) {
  for (const PartSpec& p : exp.parts)
    if (p.name == part && p.has_processes)
      return p.processes_where + ": parts." + part + ".processes: " + std::to_string(n);
  if (exp.has_processes) return exp.processes_where + ": processes: " + std::to_string(n);
  return exp.file.string() + ": part " + part + " (no processes: key, so 1 process)";
}

bool parts_set_processes(const ExperimentSpec& exp) {
  return std::any_of(exp.parts.begin(), exp.parts.end(), [](const PartSpec& p) { return p.has_processes; });
}

std::vector<int> int_list(const char* text) {
  std::vector<int> out;
  std::istringstream items(text ? text : "");
  for (std::string item; std::getline(items, item, ',');) out.push_back(std::stoi(item));
  return out;
}

}  // namespace

std::vector<int> point_processes(const ExperimentSpec& exp, const std::vector<Point>& points) {
  const int whole = exp.has_processes ? checked_processes(exp.processes, exp.processes_where, "processes") : 1;
  std::map<std::string, int> per_part;
  for (const PartSpec& part : exp.parts)
    per_part[part.name] = part.has_processes ? checked_processes(part.processes, part.processes_where,
                                                                 "parts." + part.name + ".processes")
                                             : whole;
  std::vector<int> out;
  for (const Point& p : points) out.push_back(per_part.count(p.part) ? per_part[p.part] : whole);
  return out;
}

void check_point_processes(const ExperimentSpec& exp, const std::vector<Point>& points, const PoolSpec& pool,
                           int world_size) {
  // The experiment's own count, where no part sets one: where parts do, each point is held to
  // its own count below (so a --filter'ed serial run of 1-process parts runs).
  if (pool.workers == 0 && !parts_set_processes(exp)) check_processes_key(exp, world_size);
  const std::vector<int> need = point_processes(exp, points);
  const int most = need.empty() ? 1 : *std::max_element(need.begin(), need.end());
  const std::string on_pool = "--workers " + std::to_string(most) + " or more (--gpus on a GPU host)";
  // Only a sweep whose parts set their own counts is held to them in a launched run; an
  // experiment-wide `processes:` stays what it was, the least a launch needs.
  const bool per_part = world_size > 1 && parts_set_processes(exp);
  for (size_t i = 0; i < points.size(); ++i) {
    const int n = need[i];
    const auto said = [&] { return processes_said(exp, points[i].part, n); };  // only for a message
    if (pool.workers > 0 && n > pool.workers) {
      const bool gpus = !pool.gpus.empty();
      throw ConfigError(said() + ": each of its points runs on " + std::to_string(n) + (gpus ? " GPUs" : " workers") +
                        " at once and this pool has " + std::to_string(pool.workers) + "; use " +
                        (gpus ? "--gpus with " + std::to_string(n) + " or more GPUs (e.g. --gpus all)"
                              : "--workers " + std::to_string(n) + " or more"));
    }
    if (pool.workers == 0 && world_size == 1 && n > 1)
      throw ConfigError(said() + ": its points run on " + std::to_string(n) + " ranks; run the sweep on a pool, " +
                        on_pool + ", where each point gets its own ranks (or start it with `runner launch " +
                        "--nproc-per-node " + std::to_string(n) + " " + exp.file.string() + " --filter ...`)");
    if (per_part && n != world_size)
      throw ConfigError(said() + ": this launch runs every point on its " + std::to_string(world_size) +
                        " ranks; run the sweep on a pool, " + on_pool +
                        ", where each point gets its own ranks (or --filter the part out)");
  }
}

std::vector<Point> one_process_points(const ExperimentSpec& exp, const std::vector<Point>& points) {
  const std::vector<int> need = point_processes(exp, points);
  std::vector<Point> out;
  for (size_t i = 0; i < points.size(); ++i)
    if (need[i] == 1) out.push_back(points[i]);
  return out;
}

std::optional<WorkerGroup> worker_group() {
  const char* position = std::getenv("RUNNER_WORKER_POINT");
  if (position == nullptr) return std::nullopt;
  WorkerGroup group;
  group.position = static_cast<std::size_t>(std::stoull(position));
  group.slots = int_list(std::getenv("RUNNER_WORKER_SLOTS"));
  group.gpus = int_list(std::getenv("RUNNER_WORKER_GPUS"));
  return group;
}

fs::path worker_dir(const fs::path& run_dir, int index, const std::optional<WorkerGroup>& group) {
  return run_dir / "workers" / (group ? "point-" + std::to_string(group->position) : std::to_string(index));
}

void name_worker(nlohmann::json& env, int index, const std::optional<WorkerGroup>& group, int local_rank) {
  env["worker"] = index;
  if (const char* gpu = std::getenv("RUNNER_WORKER_GPU")) env["gpu_index"] = std::atoi(gpu);
  if (!group) return;
  const auto rank = static_cast<size_t>(local_rank);
  if (rank < group->slots.size()) env["worker"] = group->slots[rank];
  env["workers"] = group->slots;
  if (group->gpus.empty()) return;
  if (rank < group->gpus.size()) env["gpu_index"] = group->gpus[rank];
  env["gpu_indices"] = group->gpus;
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
