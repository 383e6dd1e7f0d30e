#include "history/schedule.hpp"

#include <algorithm>
#include <iterator>
#include <regex>
#include <stdexcept>

namespace runner::history {
namespace {

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::pair<int, int> hour_minute(const std::string& at) {
  static const std::regex form(R"(^([01]?[0-9]|2[0-3]):([0-5][0-9])$)");
  std::smatch m;
  if (!std::regex_match(at, m, form)) throw std::invalid_argument("--at '" + at + "': expected HH:MM (24-hour, local time)");
  return {std::stoi(m[1]), std::stoi(m[2])};
}

const char* kExpressible =
    ": cron and systemd timers fire on the calendar; use minutes dividing an hour (5m, 15m, 30m), hours dividing "
    "a day (1h, 6h, 12h), or whole days (24h, 7d), or --slurm for any interval";

std::string run_command(const Schedule& s) { return quote(s.runner) + " schedule --run " + quote(s.name); }

}  // namespace

nlohmann::json to_json(const Schedule& s) {
  return {{"name", s.name},       {"experiment", s.experiment}, {"workdir", s.workdir},
          {"runner", s.runner},   {"every", s.every},           {"every_seconds", s.every_seconds},
          {"at", s.at},           {"compare_to", s.compare_to}, {"overrides", s.overrides},
          {"sbatch_args", s.sbatch_args}, {"device", s.device}, {"history", s.history},
          {"log", s.log},         {"backend", s.backend},       {"smoke", s.smoke},
          {"threshold", s.threshold}, {"alpha", s.alpha},       {"plugin_paths", s.plugin_paths},
          {"env", s.env},         {"output", s.output}};
}

std::map<std::string, std::string> captured_environment(char** environ) {
  static const char* prefixes[] = {"RUNNER_", "CUDA_", "NCCL_", "TORCH_", "PYTORCH_", "OMP_"};
  static const char* names[] = {"PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "VIRTUAL_ENV"};
  std::map<std::string, std::string> out;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = entry.substr(0, eq);
    bool keep = std::find(std::begin(names), std::end(names), name) != std::end(names);
    for (const char* p : prefixes) keep = keep || name.rfind(p, 0) == 0;
    // Where the definitions and the crontab live is the firing's own business.
    if (name == "RUNNER_CRONTAB") keep = false;
    if (keep) out[name] = entry.substr(eq + 1);
  }
  return out;
}

Schedule schedule_from_json(const nlohmann::json& j) {
  Schedule s;
  s.name = j.at("name");
  s.experiment = j.at("experiment");
  s.workdir = j.at("workdir");
  s.runner = j.at("runner");
  s.every = j.value("every", "");
  s.every_seconds = j.value("every_seconds", 0L);
  s.at = j.value("at", "02:00");
  s.compare_to = j.value("compare_to", "last-good");
  s.overrides = j.value("overrides", std::vector<std::string>{});
  s.sbatch_args = j.value("sbatch_args", std::vector<std::string>{});
  s.device = j.value("device", "");
  s.history = j.value("history", "");
  s.log = j.value("log", "");
  s.backend = j.value("backend", "");
  s.smoke = j.value("smoke", false);
  s.threshold = j.value("threshold", 0.05);
  s.alpha = j.value("alpha", 0.05);
  s.plugin_paths = j.value("plugin_paths", std::vector<std::string>{});
  s.env = j.value("env", std::map<std::string, std::string>{});
  s.output = j.value("output", "");
  return s;
}

std::string cron_times(long e, const std::string& at) {
  const auto [hour, minute] = hour_minute(at);
  const std::string hm = std::to_string(minute) + " " + std::to_string(hour);
  if (e % 86400 == 0) {
    const long days = e / 86400;
    if (days == 1) return hm + " * * *";
    if (days == 7) return hm + " * * 0";
    if (days < 31) return hm + " */" + std::to_string(days) + " * *";
  } else if (e % 3600 == 0 && 86400 % e == 0) {
    return std::to_string(minute) + " */" + std::to_string(e / 3600) + " * * *";
  } else if (e % 60 == 0 && 3600 % e == 0) {
    return "*/" + std::to_string(e / 60) + " * * * *";
  }
  throw std::invalid_argument("--every " + std::to_string(e) + "s" + kExpressible);
}

std::string systemd_on_calendar(long e, const std::string& at) {
  const auto [hour, minute] = hour_minute(at);
  char hm[16];
  std::snprintf(hm, sizeof hm, "%02d:%02d:00", hour, minute);
  if (e % 86400 == 0) {
    const long days = e / 86400;
    if (days == 1) return std::string("*-*-* ") + hm;
    if (days == 7) return std::string("Sun *-*-* ") + hm;
    if (days < 31) return "*-*-1/" + std::to_string(days) + " " + hm;
  } else if (e % 3600 == 0 && 86400 % e == 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "*-*-* 00/%ld:%02d:00", e / 3600, minute);
    return buf;
  } else if (e % 60 == 0 && 3600 % e == 0) {
    return "*-*-* *:00/" + std::to_string(e / 60) + ":00";
  }
  throw std::invalid_argument("--every " + std::to_string(e) + "s" + kExpressible);
}

// The firing's own output (a schedule that cannot even start, e.g. a removed
// definition) goes to a file `runner schedule --list` names, never /dev/null.
// cron turns an unescaped % in the command into a newline (and cuts the command
// there), also inside quotes: each is escaped as \%, which cron hands on as %.
std::string cron_line(const Schedule& s) {
  const std::string sink = s.output.empty() ? std::string("/dev/null") : quote(s.output);
  const std::string command = "cd " + quote(s.workdir) + " && " + run_command(s) + " >>" + sink + " 2>&1";
  std::string escaped;
  for (char c : command) escaped += c == '%' ? std::string("\\%") : std::string(1, c);
  return cron_times(s.every_seconds, s.at) + " " + escaped + " # runner:" + s.name;
}

std::string systemd_service(const Schedule& s) {
  return "# Installed by `runner schedule`; remove with `runner schedule --remove " + s.name + "`.\n"
         "[Unit]\nDescription=runner regression sweep " + s.name + " (" + s.experiment + ")\n\n"
         "[Service]\nType=oneshot\nWorkingDirectory=" + s.workdir + "\nExecStart=" + run_command(s) + "\n";
}

std::string systemd_timer(const Schedule& s) {
  return "# Installed by `runner schedule`; remove with `runner schedule --remove " + s.name + "`.\n"
         "[Unit]\nDescription=runner regression sweep " + s.name + " every " + s.every + "\n\n"
         "[Timer]\nOnCalendar=" + systemd_on_calendar(s.every_seconds, s.at) +
         "\nPersistent=true\n\n[Install]\nWantedBy=timers.target\n";
}

std::string sbatch_script(const Schedule& s, const std::string& script_path) {
  std::string text = "#!/bin/bash\n# Installed by `runner schedule --slurm`; remove with `runner schedule --remove " +
                     s.name + "`.\n#SBATCH --job-name=runner-" + s.name + "\n#SBATCH --output=" +
                     script_path.substr(0, script_path.size() - 7) + ".slurm-%j.log\n";
  for (const auto& a : s.sbatch_args) text += "#SBATCH " + a + "\n";
  text += "# Resubmit before running, so one failed sweep does not end the schedule;\n"
          "# a removed schedule has no script left to resubmit.\n"
          "[[ -f " + quote(script_path) + " ]] && sbatch --begin=now+" + std::to_string(s.every_seconds) + " " +
          quote(script_path) + "\ncd " + quote(s.workdir) + " && exec " + run_command(s) + "\n";
  return text;
}

}  // namespace runner::history
