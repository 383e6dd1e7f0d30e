// A history that cannot be written (issue 50, D11): on a read-only mount it is
// listed, drawn and compared (the verdict not kept, and said so); anything that
// must write it (a run, --resume, --import, --mark-good) is refused with one line
// naming the file and the fix, exit 2, before a run directory is made or touched.
// The mount is real: a read-only bind mount in a private mount namespace
// (`unshare -rm`, no root needed where user namespaces are allowed); file modes
// would not do, since root (CI, containers) writes through them.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <fstream>

#include "history/store.hpp"
#include "support.hpp"

namespace runner::history {
namespace {

using testing::fresh_dir;
using testing::read_text;

struct Result {
  int code;
  std::string output;
};

Result shell(const std::string& cmd, const std::filesystem::path& log) {
  const int status = std::system((cmd + " > " + log.string() + " 2>&1").c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text(log)};
}

// `args` of the runner with `history_dir` mounted read-only over itself; "" runs
// only the mount and a write probe.
Result read_only(const std::filesystem::path& history_dir, const std::filesystem::path& work, const std::string& args) {
  static int n = 0;
  const std::string d = history_dir.string();
  const std::string inner = "mount --bind " + d + " " + d + " && mount -o remount,bind,ro " + d + " && " +
                            (args.empty() ? "! touch " + d + "/probe"
                                          : "cd " + work.string() + " && RUNNER_PLUGIN_PATH=" RUNNER_ECHO_PLUGIN_DIR
                                            " RUNNER_HISTORY=" + d + "/history.sqlite " RUNNER_EXE " " + args);
  return shell("unshare -rm sh -c '" + inner + "'", work / ("ro-" + std::to_string(n++) + ".txt"));
}

Result writable(const std::filesystem::path& history, const std::filesystem::path& work, const std::string& args) {
  static int n = 0;
  return shell("cd " + work.string() + " && RUNNER_PLUGIN_PATH=" RUNNER_ECHO_PLUGIN_DIR " RUNNER_HISTORY=" +
                   history.string() + " " RUNNER_EXE " " + args,
               work / ("rw-" + std::to_string(n++) + ".txt"));
}

const char* kExperiment = "experiment: tiny\nmeasure: {warmup_steps: 0, measured_steps: 3}\ntask: echo\n"
                          "sweep:\n  value: [1.0, 2.0]\n";

size_t lines_of(const std::string& s) { return std::count(s.begin(), s.end(), '\n'); }

TEST(HistoryReadOnly, AReadOnlyMountIsListedAndComparedAndRefusesWritersByName) {
  const auto work = fresh_dir("read-only");
  const auto history_dir = work / "store";
  std::filesystem::create_directories(history_dir);
  const auto history = history_dir / "history.sqlite";
  std::ofstream(work / "tiny.yaml") << kExperiment;
  ASSERT_EQ(writable(history, work, "tiny.yaml --device cpu --out a").code, 0);
  ASSERT_EQ(writable(history, work, "tiny.yaml --device cpu --out b").code, 0);
  if (read_only(history_dir, work, "").code != 0)
    GTEST_SKIP() << "no read-only bind mount here (unshare -rm: user or mount namespaces not allowed)";
  const std::string store_before = read_text(history);
  const std::string results_before = read_text(work / "a" / "results.jsonl");

  const Result list = read_only(history_dir, work, "history");
  EXPECT_EQ(list.code, 0) << list.output;
  EXPECT_NE(list.output.find("tiny"), std::string::npos) << list.output;
  EXPECT_EQ(lines_of(list.output), 3u) << "a header and two runs: " << list.output;
  const Result site = read_only(history_dir, work, "history --html site");
  EXPECT_EQ(site.code, 0) << site.output;
  EXPECT_TRUE(std::filesystem::exists(work / "site" / "index.html")) << site.output;

  const Result compare = read_only(history_dir, work, "compare run:1 run:2");
  EXPECT_TRUE(compare.code == 0 || compare.code == 1) << compare.output;
  EXPECT_NE(compare.output.find("the verdict is not kept: history " + history.string() +
                                " cannot be written (Read-only file system)"),
            std::string::npos)
      << compare.output;

  // Writers: one line naming the file, why, and the fix; exit 2; nothing touched.
  const std::string refusal =
      "history " + history.string() + ": cannot be written (Read-only file system); set --history, RUNNER_HISTORY or "
      "`history:` to a writable file, or off\n";
  for (const std::string& args : {std::string("tiny.yaml --device cpu --out c"),
                                  std::string("tiny.yaml --device cpu --resume a"),
                                  std::string("history --import a"), std::string("history --mark-good 1")}) {
    const Result r = read_only(history_dir, work, args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.output;
    EXPECT_EQ(lines_of(r.output), 1u) << args << ": " << r.output;
    EXPECT_NE(r.output.find(refusal), std::string::npos) << args << ": " << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(work / "c")) << "no run directory for a run that cannot be recorded";
  EXPECT_EQ(read_text(work / "a" / "results.jsonl"), results_before);
  EXPECT_EQ(read_text(history), store_before);
  const Result after = writable(history, work, "history");
  EXPECT_EQ(after.code, 0) << after.output;
  EXPECT_EQ(lines_of(after.output), 3u) << after.output;
}

// A parent that is a regular file cannot hold a history for anyone, root included.
TEST(HistoryReadOnly, AHistoryUnderARegularFileIsRefusedBeforeTheRun) {
  const auto work = fresh_dir("read-only-file-parent");
  std::ofstream(work / "tiny.yaml") << kExperiment;
  std::ofstream(work / "plain") << "not a directory\n";
  const auto history = work / "plain" / "history.sqlite";
  EXPECT_EQ(unwritable_reason(history), (work / "plain").string() + " is not a directory");
  EXPECT_EQ(unwritable_reason(work / "new" / "deeper" / "history.sqlite"), "");
  const Result r = writable(history, work, "tiny.yaml --device cpu --out run");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(r.output, "runner: history " + history.string() + ": cannot be written (" + (work / "plain").string() +
                          " is not a directory); set --history, RUNNER_HISTORY or `history:` to a writable file, or "
                          "off\n");
  EXPECT_FALSE(std::filesystem::exists(work / "run"));
}

}  // namespace
}  // namespace runner::history
