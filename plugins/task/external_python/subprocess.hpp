// Runs a program to completion and captures what it wrote, stdout and stderr apart.
#pragma once
#include <string>
#include <vector>

namespace plugins::external_python {

struct ProcessResult {
  int exit_code = 0;        // 128 + signal number when killed by a signal
  std::string stdout_text;
  std::string stderr_text;
};

// argv[0] is looked up on PATH. Throws std::runtime_error if it cannot be started.
ProcessResult run_process(const std::vector<std::string>& argv);

// `option` (params.python), else $RUNNER_PYTHON, else the interpreter whose PyTorch
// the build used, else python3.
std::string python_executable(const std::string& option);
// Throws std::runtime_error naming the interpreter and how to choose another when
// it cannot `import torch`. Checked once per interpreter per process.
void check_interpreter(const std::string& python);

}  // namespace plugins::external_python
