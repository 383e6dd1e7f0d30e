// Schedules: intervals as cron and systemd calendars, the unit and script texts,
// and install/list/remove through the crontab path against a temporary crontab.
#include <gtest/gtest.h>

#include <iostream>

#include "history/cli.hpp"
#include "history/schedule.hpp"
#include "support.hpp"

namespace runner::history {
namespace {

using testing::fresh_dir;
using testing::read_text;

TEST(Schedule, IntervalsBecomeCronTimes) {
  EXPECT_EQ(cron_times(86400, "02:30"), "30 2 * * *");
  EXPECT_EQ(cron_times(7 * 86400, "02:00"), "0 2 * * 0");
  EXPECT_EQ(cron_times(6 * 3600, "02:15"), "15 */6 * * *");
  EXPECT_EQ(cron_times(15 * 60, "02:00"), "*/15 * * * *");
  EXPECT_THROW(cron_times(36 * 3600, "02:00"), std::invalid_argument);
  EXPECT_THROW(cron_times(86400, "25:00"), std::invalid_argument);
}

TEST(Schedule, IntervalsBecomeSystemdCalendars) {
  EXPECT_EQ(systemd_on_calendar(86400, "02:30"), "*-*-* 02:30:00");
  EXPECT_EQ(systemd_on_calendar(6 * 3600, "02:15"), "*-*-* 00/6:15:00");
  EXPECT_EQ(systemd_on_calendar(30 * 60, "02:00"), "*-*-* *:00/30:00");
  EXPECT_THROW(systemd_on_calendar(7 * 3600, "02:00"), std::invalid_argument);
}

Schedule nightly() {
  Schedule s;
  s.name = "nightly";
  s.experiment = "/proj/experiments/x.yaml";
  s.workdir = "/proj";
  s.runner = "/proj/build/runner";
  s.every = "24h";
  s.every_seconds = 86400;
  s.backend = "systemd";
  return s;
}

TEST(Schedule, SystemdUnitsRunTheScheduledSweepFromTheProject) {
  const Schedule s = nightly();
  EXPECT_NE(systemd_service(s).find("ExecStart='/proj/build/runner' schedule --run 'nightly'"), std::string::npos);
  EXPECT_NE(systemd_service(s).find("WorkingDirectory=/proj"), std::string::npos);
  EXPECT_NE(systemd_timer(s).find("OnCalendar=*-*-* 02:00:00"), std::string::npos);
  EXPECT_NE(systemd_timer(s).find("Persistent=true"), std::string::npos);
}

// cron cuts a command at an unescaped % (a working directory named "100%" ran
// `cd '/proj/100` and nothing else).
TEST(Schedule, CronLineEscapesEveryPercentSign) {
  Schedule s = nightly();
  s.workdir = "/proj/100%";
  s.output = "/logs/%d.log";
  EXPECT_EQ(cron_line(s), "0 2 * * * cd '/proj/100\\%' && '/proj/build/runner' schedule --run 'nightly' "
                          ">>'/logs/\\%d.log' 2>&1 # runner:nightly");
}

TEST(Schedule, SbatchScriptResubmitsItselfWithBegin) {
  Schedule s = nightly();
  s.sbatch_args = {"--gres=gpu:1"};
  const std::string text = sbatch_script(s, "/d/nightly.sbatch");
  EXPECT_NE(text.find("#SBATCH --job-name=runner-nightly"), std::string::npos);
  EXPECT_NE(text.find("#SBATCH --gres=gpu:1"), std::string::npos);
  EXPECT_NE(text.find("sbatch --begin=now+86400 '/d/nightly.sbatch'"), std::string::npos) << text;
  EXPECT_NE(text.find("schedule --run 'nightly'"), std::string::npos);
}

TEST(Schedule, CronInstallListAndRemoveEditOnlyTheirOwnLine) {
  const auto dir = fresh_dir("schedule-cron");
  const auto crontab = dir / "crontab";
  std::ofstream(crontab) << "MAILTO=me@example.org\n0 5 * * * /usr/bin/backup # someone else's\n";
  std::ofstream(dir / "x.yaml") << "experiment: x\ntask: echo\n";
  setenv("RUNNER_CRONTAB", crontab.c_str(), 1);
  setenv("RUNNER_SCHEDULE_DIR", (dir / "schedules").c_str(), 1);
  const std::vector<std::string> args = {(dir / "x.yaml").string(), "--every", "24h", "--at", "03:10", "--cron",
                                         "--history", (dir / "h.sqlite").string(), "--log", (dir / "regressions.log").string()};
  ASSERT_EQ(schedule_command(args, "/opt/runner/bin/runner"), 0);
  const std::string table = read_text(crontab);
  EXPECT_NE(table.find("/usr/bin/backup"), std::string::npos);
  EXPECT_NE(table.find("10 3 * * * cd "), std::string::npos) << table;
  // A firing's own output goes to a file --list names, never to /dev/null.
  EXPECT_NE(table.find("'/opt/runner/bin/runner' schedule --run 'x' >>'" + (dir / "schedules" / "x.cron.log").string() +
                       "' 2>&1 # runner:x"), std::string::npos) << table;
  EXPECT_EQ(table.find("/dev/null"), std::string::npos) << table;
  EXPECT_EQ(schedule_command(args, "/opt/runner/bin/runner"), 2);  // the name is taken

  ::testing::internal::CaptureStdout();
  EXPECT_EQ(schedule_command({"--list"}, ""), 0);
  const std::string listing = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(listing.find("x: " + (dir / "x.yaml").string() + " every 24h via cron"), std::string::npos) << listing;
  EXPECT_NE(listing.find("next: cron 10 3 * * *"), std::string::npos) << listing;
  EXPECT_NE(listing.find("firing output: " + (dir / "schedules" / "x.cron.log").string()), std::string::npos) << listing;

  EXPECT_EQ(schedule_command({"--remove", "x"}, ""), 0);
  const std::string after = read_text(crontab);
  EXPECT_EQ(after, "MAILTO=me@example.org\n0 5 * * * /usr/bin/backup # someone else's\n");
  EXPECT_FALSE(std::filesystem::exists(dir / "schedules" / "x.json"));
  EXPECT_EQ(schedule_command({"--remove", "x"}, ""), 1);
  unsetenv("RUNNER_CRONTAB");
  unsetenv("RUNNER_SCHEDULE_DIR");
}

TEST(Schedule, TheInstallingShellsEnvironmentIsCapturedButNotItsCrontabOrHome) {
  std::vector<std::string> text = {"RUNNER_PLUGIN_PATH=/p", "PATH=/venv/bin:/usr/bin", "HOME=/home/me",
                                   "CUDA_VISIBLE_DEVICES=1", "RUNNER_CRONTAB=/tmp/c", "VIRTUAL_ENV=/venv", "TERM=xterm"};
  std::vector<char*> environ_list;
  for (auto& t : text) environ_list.push_back(t.data());
  environ_list.push_back(nullptr);
  const auto env = captured_environment(environ_list.data());
  const std::map<std::string, std::string> expected = {{"CUDA_VISIBLE_DEVICES", "1"}, {"PATH", "/venv/bin:/usr/bin"},
                                                       {"RUNNER_PLUGIN_PATH", "/p"}, {"VIRTUAL_ENV", "/venv"}};
  EXPECT_EQ(env, expected);
  Schedule s = nightly();
  s.env = env;
  s.plugin_paths = {"/plugins"};
  const Schedule back = schedule_from_json(to_json(s));
  EXPECT_EQ(back.env, env);
  EXPECT_EQ(back.plugin_paths, s.plugin_paths);
}

TEST(Schedule, AnIntervalCronCannotExpressIsRefusedBeforeInstalling) {
  const auto dir = fresh_dir("schedule-bad");
  std::ofstream(dir / "x.yaml") << "experiment: x\n";
  setenv("RUNNER_CRONTAB", (dir / "crontab").c_str(), 1);
  setenv("RUNNER_SCHEDULE_DIR", (dir / "schedules").c_str(), 1);
  EXPECT_EQ(schedule_command({(dir / "x.yaml").string(), "--every", "36h", "--cron", "--history",
                              (dir / "h.sqlite").string()}, "/r"), 2);
  EXPECT_FALSE(std::filesystem::exists(dir / "crontab"));
  EXPECT_FALSE(std::filesystem::exists(dir / "schedules" / "x.json"));
  unsetenv("RUNNER_CRONTAB");
  unsetenv("RUNNER_SCHEDULE_DIR");
}

// Without a crontab command a cron schedule is refused (exit 2) before its entry is
// printed, by --dry-run too, and nothing is left behind.
TEST(Schedule, WithoutCronTheScheduleIsRefusedBeforeItsEntryIsPrinted) {
  const auto dir = fresh_dir("schedule-no-cron");
  std::ofstream(dir / "x.yaml") << "experiment: x\n";
  unsetenv("RUNNER_CRONTAB");
  setenv("RUNNER_SCHEDULE_DIR", (dir / "schedules").c_str(), 1);
  const std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  setenv("PATH", (dir / "empty-bin").c_str(), 1);  // no crontab (nor anything else) on it
  for (const bool dry_run : {false, true}) {
    std::vector<std::string> args = {(dir / "x.yaml").string(), "--every", "24h", "--cron", "--history",
                                     (dir / "h.sqlite").string()};
    if (dry_run) args.push_back("--dry-run");
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    const int code = schedule_command(args, "/r");
    const std::string out = ::testing::internal::GetCapturedStdout();
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(code, 2) << dry_run;
    EXPECT_EQ(out.find("crontab entry"), std::string::npos) << out;
    EXPECT_NE(err.find("no crontab command here"), std::string::npos) << err;
    EXPECT_FALSE(std::filesystem::exists(dir / "schedules" / "x.json"));
  }
  setenv("PATH", path.c_str(), 1);
  unsetenv("RUNNER_SCHEDULE_DIR");
}

}  // namespace
}  // namespace runner::history
