// Benchmark: `runner compare` of two runs of 10,000 points each, in a history
// holding 1,000,000 records (100 runs x 10,000 points, every record with a
// 10-sample step_ms and a peak_bytes value). The store is built once and kept.
// Times the whole command (wall clock, process start included) and the same work
// in process, median of 7 each (RUNNER_BENCH_REPETITIONS), and the start of the
// LibTorch host for comparison (what `runner compare` paid before the split).
// Exit code 1 when the command takes a second or more.
//   build/bench/history/history_compare_bench [db file] [records] [points per run]
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <random>

#include "history/compare.hpp"
#include "history/store.hpp"

using namespace runner::history;

namespace {

double run_ms(const std::string& cmd, int* code) {
  const auto t0 = std::chrono::steady_clock::now();
  const int status = std::system(cmd.c_str());
  *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int repetitions = 7;

// Median wall time of the command over `repetitions` runs, after one untimed run
// (it pages the store in and, on a store made by an older runner, adds indexes).
double median_ms(const std::string& cmd, int* code) {
  run_ms(cmd, code);
  std::vector<double> t;
  for (int i = 0; i < repetitions; ++i) t.push_back(run_ms(cmd, code));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string db = argc > 1 ? argv[1] : "bench-history.sqlite";
  const long records = argc > 2 ? std::stol(argv[2]) : 1'000'000;
  const long points = argc > 3 ? std::stol(argv[3]) : 10'000;
  const long runs = records / points;
  if (const char* r = std::getenv("RUNNER_BENCH_REPETITIONS")) repetitions = std::max(1, std::atoi(r));
  // The store is made from a fixed seed; one with another size (or left half-built
  // by an interrupted bench) is made again from scratch.
  auto records_in = [](const std::string& file) {
    HistoryStore store(file);
    std::int64_t n = 0;
    for (const auto& r : store.runs({})) n += r.records;
    return n;
  };
  if (std::filesystem::exists(db) && records_in(db) != (runs * points))
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db + suffix);
  {
    HistoryStore store(db);
    if (records_in(db) == 0) {
      std::cerr << "building " << db << ": " << runs << " runs x " << points << " points\n";
      std::mt19937_64 rng(42);
      std::normal_distribution<double> noise(0.0, 0.02);
      const auto t0 = std::chrono::steady_clock::now();
      for (long r = 0; r < runs; ++r) {
        const nlohmann::json env = {{"device", "cpu"}, {"cpu", "bench CPU"}, {"libtorch", "2.11.0"},
                                    {"host", "bench"}, {"git_commit", "c" + std::to_string(1000000 + r)}};
        char started[32];
        std::snprintf(started, sizeof started, "2026-%02ld-%02ldT02:00:00Z", 1 + r / 28 % 12, 1 + r % 28);
        const auto id = store.begin_run("bench_sweep", {}, env, false, started);
        std::vector<runner::StoredRecord> batch;
        batch.reserve(static_cast<size_t>(points));
        for (long p = 0; p < points; ++p) {
          // The last run is 20% slower on every tenth point.
          const double center = (1.0 + 0.001 * static_cast<double>(p % 100)) * (r == runs - 1 && p % 10 == 0 ? 1.2 : 1.0);
          std::vector<double> samples;
          for (int s = 0; s < 10; ++s) samples.push_back(center * (1 + noise(rng)));
          std::vector<double> sorted = samples;
          std::sort(sorted.begin(), sorted.end());
          batch.push_back(runner::decode_record({{"experiment", "bench_sweep"}, {"part", "main"}, {"point", p}, {"status", "ok"},
                           {"params", {{"size", 64 * (1 + p % 100)}, {"batch", p / 100}, {"dtype", "bf16"}}},
                           {"labels", nlohmann::json::object()}, {"time", started},
                           {"metrics",
                            {{"step_ms", {{"unit", "ms"}, {"n", 10}, {"mean", center}, {"std", 0.02 * center},
                                          {"median", (sorted[4] + sorted[5]) / 2}, {"min", sorted.front()},
                                          {"max", sorted.back()}, {"samples", samples}}},
                             {"peak_bytes", {{"unit", "bytes"}, {"value", 1e6 * static_cast<double>(1 + p % 100)}}}}}}));
        }
        store.add_point(id, batch);  // one transaction per run keeps building fast
        store.finish_run(id);
      }
      std::cerr << "built in " << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
                << " s\n";
    }
  }
  HistoryStore store(db);
  const auto all = store.runs({});
  std::int64_t total = 0;
  for (const auto& r : all) total += r.records;
  const std::string a = "run:" + std::to_string(all[1].id), b = "run:" + std::to_string(all[0].id);
  const std::string base = std::string(RUNNER_EXE) + " compare " + a + " " + b + " --history " + db;
  int code = 0;
  const double startup = median_ms(std::string(RUNNER_EXE) + " compare --help > /dev/null", &code);
  const double torch_startup = median_ms(std::string(RUNNER_TORCH_EXE) + " --version > /dev/null", &code);
  const double json_ms = median_ms(base + " --format json > /dev/null", &code);
  const int json_code = code;
  const double table_ms = median_ms(base + " --format table > /dev/null", &code);
  // The same work in process: load both runs from the store, match, test,
  // render JSON. The difference to the command is process start (LibTorch).
  std::vector<double> lib_ms;
  size_t rows = 0;
  for (int i = 0; i < repetitions; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    HistoryStore s(db);
    Side sa = resolve_side(a, &s, nullptr, ""), sb = resolve_side(b, &s, &sa, "");
    const Comparison c = compare(std::move(sa), std::move(sb), CompareOptions{});
    std::ostringstream json;
    write_json(c, json);
    rows = c.rows.size();
    lib_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(lib_ms.begin(), lib_ms.end());
  std::printf("history: %lld records in %zu runs (%s)\n", static_cast<long long>(total), all.size(), db.c_str());
  std::printf("runner compare %s %s (%ld points x 2 metrics), wall clock, median of %d, process start included:\n",
              a.c_str(), b.c_str(), points, repetitions);
  std::printf("  --format json : %8.1f ms (exit %d: %s)\n", json_ms, json_code,
              json_code == 1 ? "regression found, as built in" : "UNEXPECTED: the built-in regression was missed");
  std::printf("  --format table: %8.1f ms\n", table_ms);
  std::printf("  process start alone: runner compare --help %.1f ms; runner-torch --version (LibTorch) %.1f ms\n",
              startup, torch_startup);
  std::printf("  in process (store -> compare -> JSON, %zu rows): %.1f ms\n", rows, lib_ms[lib_ms.size() / 2]);
  return json_ms < 1000 && table_ms < 1000 && json_code == 1 ? 0 : 1;
}
