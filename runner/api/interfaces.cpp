// Out-of-line destructors: they anchor each interface's vtable and typeinfo in
// runner_api, so dynamic_cast works across plugin libraries.
#include "runner/attention.hpp"
#include "runner/ddp.hpp"
#include "runner/model.hpp"
#include "runner/optimizer.hpp"
#include "runner/profiler.hpp"
#include "runner/task.hpp"

namespace runner {
PluginBase::~PluginBase() = default;
Task::~Task() = default;
Model::~Model() = default;
std::vector<NamedTensor> Model::forward_traced(const torch::Tensor& inputs) { return {{"output", forward(inputs)}}; }
Attention::~Attention() = default;
OptimizerFactory::~OptimizerFactory() = default;
DataParallel::~DataParallel() = default;
Profiler::~Profiler() = default;
Logger::~Logger() = default;
PluginFactory::~PluginFactory() = default;
StepTimer::~StepTimer() = default;
RangeListener::~RangeListener() = default;
}  // namespace runner
