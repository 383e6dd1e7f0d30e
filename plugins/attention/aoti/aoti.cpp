// attention/aoti: attention compiled by TorchInductor ahead of time (AOTInductor) and run
// from C++ through torch::inductor::AOTIModelPackageLoader: the C++ side of a
// torch.compile row. export_attention.py (beside this file) writes one forward and one
// backward package per device, dtype and causal flag; this plugin joins them into an
// autograd function. The backward package recomputes the probabilities from q and k.
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/autograd.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include "runner/attention.hpp"
#include "runner/outcome.hpp"
#include "runner/range.hpp"

namespace {

namespace fs = std::filesystem;
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;
using torch::inductor::AOTIModelPackageLoader;

constexpr const char* kExport = "python plugins/attention/aoti/export_attention.py";

std::string dtype_tag(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "fp32";
    case at::kBFloat16: return "bf16";
    case at::kHalf: return "fp16";
    default: return "";
  }
}

// The two compiled programs of one (device, dtype, causal) and what Inductor made of them.
struct Programs {
  std::unique_ptr<AOTIModelPackageLoader> forward, backward;
  std::string mechanism;
  std::mutex run;  // forward and backward may come from different threads (autograd's)
};

// q, k, v as the packages take them: [batch, seq, d], dense.
torch::Tensor as_3d(const torch::Tensor& t) { return t.reshape({-1, t.size(-2), t.size(-1)}).contiguous(); }

struct AotiFunction : torch::autograd::Function<AotiFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, Programs* programs) {
    runner::ScopedRange range("attention/aoti_forward");
    const torch::Tensor q3 = as_3d(q), k3 = as_3d(k), v3 = as_3d(v);
    std::vector<torch::Tensor> out;
    {
      std::lock_guard<std::mutex> lock(programs->run);
      out = programs->forward->run({q3, k3, v3});
    }
    ctx->save_for_backward({q3, k3, v3});
    ctx->saved_data["programs"] = reinterpret_cast<std::int64_t>(programs);
    ctx->saved_data["q_shape"] = q.sizes().vec();
    ctx->saved_data["k_shape"] = k.sizes().vec();
    return out.at(0).reshape(q.sizes());
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    runner::ScopedRange range("attention/aoti_backward");
    auto* programs = reinterpret_cast<Programs*>(ctx->saved_data["programs"].toInt());
    const auto s = ctx->get_saved_variables();
    const torch::Tensor dout = as_3d(grads[0].to(s[0].scalar_type()));
    std::vector<torch::Tensor> g;
    {
      std::lock_guard<std::mutex> lock(programs->run);
      g = programs->backward->run({s[0], s[1], s[2], dout});
    }
    const auto q_shape = ctx->saved_data["q_shape"].toIntVector();
    const auto k_shape = ctx->saved_data["k_shape"].toIntVector();
    return {g.at(0).reshape(q_shape), g.at(1).reshape(k_shape), g.at(2).reshape(k_shape), torch::Tensor()};
  }
};

class AotiAttention : public runner::Attention {
 public:
  explicit AotiAttention(fs::path dir) : dir_(std::move(dir)) {}

  torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const runner::AttentionMask& mask) override {
    if (mask.kind == runner::AttentionMask::Kind::sliding_window)
      throw runner::SkipPoint("attention/aoti: the exported packages cover none and causal masks, not a sliding window");
    const bool is_causal = mask.hides_future();
    TORCH_CHECK(q.dim() >= 2 && q.dim() == k.dim() && k.dim() == v.dim(),
                "attention/aoti: q, k, v need the same rank >= 2, got ", q.sizes(), ", ", k.sizes(), ", ", v.sizes());
    TORCH_CHECK(q.size(-1) == k.size(-1) && k.sizes() == v.sizes() &&
                    q.sizes().slice(0, q.dim() - 2) == k.sizes().slice(0, k.dim() - 2),
                "attention/aoti: shapes must be q [..., Lq, d], k and v [..., Lk, d] with the same leading dims; got q ",
                q.sizes(), ", k ", k.sizes(), ", v ", v.sizes());
    TORCH_CHECK(q.scalar_type() == k.scalar_type() && k.scalar_type() == v.scalar_type() &&
                    q.device() == k.device() && k.device() == v.device(),
                "attention/aoti: q, k, v need one dtype and one device");
    // The packages were exported with these bounds (export_attention.py's Dims).
    if (q.size(-2) < 2 || k.size(-2) < 2 || q.size(-1) < 2 || q.size(-1) > 1024)
      throw runner::SkipPoint("attention/aoti: sequence lengths >= 2 and head dim 2..1024 only (the exported bounds)");
    const std::string dtype = dtype_tag(q.scalar_type());
    if (dtype.empty())
      throw runner::SkipPoint(std::string("attention/aoti: dtype ") + c10::toString(q.scalar_type()) +
                              " is not exported; use float32, bfloat16 or float16");
    Programs& programs = load(q.device(), dtype, is_causal);
    mechanism_ = programs.mechanism;
    return AotiFunction::apply(q, k, v, &programs);
  }

  std::string mechanism() const override { return mechanism_; }

 private:
  Programs& load(const c10::Device& device, const std::string& dtype, bool causal) {
    const std::string where = device.is_cuda() ? "cuda" : "cpu";
    const std::string tag = where + "_" + dtype + (causal ? "_causal" : "_full");
    const auto key = std::make_pair(device.index(), tag);  // tag names the device type
    auto it = programs_.find(key);
    if (it != programs_.end()) return *it->second;

    const fs::path forward = dir_ / ("attention_fwd_" + tag + ".pt2");
    const fs::path backward = dir_ / ("attention_bwd_" + tag + ".pt2");
    const fs::path info = dir_ / ("attention_" + tag + ".json");
    for (const auto& p : {forward, backward, info})
      if (!fs::exists(p))
        throw runner::SkipPoint("attention/aoti: no package " + p.string() + " for " + tag + "; export it with `" +
                                kExport + " --out " + dir_.string() + " --device " + where + " --dtype " + dtype +
                                " --causal " + (causal ? "true" : "false") + "`");
    auto programs = std::make_unique<Programs>();
    const auto index = device.is_cuda() ? device.index() : c10::DeviceIndex(-1);
    programs->forward = std::make_unique<AOTIModelPackageLoader>(forward.string(), "model", false, 1, index);
    programs->backward = std::make_unique<AOTIModelPackageLoader>(backward.string(), "model", false, 1, index);
    std::ifstream in(info);
    const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object())
      throw std::runtime_error("attention/aoti: " + info.string() + " is not valid JSON; export the packages again");
    programs->mechanism = "AOTInductor (torch " + j.value("torch", std::string("?")) + "): forward " +
                          j.value("forward_mechanism", std::string("?")) + "; backward " +
                          j.value("backward_mechanism", std::string("?"));
    return *programs_.emplace(key, std::move(programs)).first->second;
  }

  fs::path dir_;
  std::map<std::pair<c10::DeviceIndex, std::string>, std::unique_ptr<Programs>> programs_;
  std::string mechanism_;
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Attention;
  m.name = "aoti";
  m.version = "1";
  m.description = "attention compiled by TorchInductor ahead of time (AOTInductor packages), forward and backward";
  m.options = {runner::opt_string("package_dir", "aoti-packages",
                                  "directory of the packages export_attention.py wrote (relative: to the working directory)")};
  m.create = [](const runner::Params& p, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    const fs::path dir = p.text("package_dir");
    if (!fs::is_directory(dir))
      throw std::invalid_argument("attention/aoti: package_dir '" + dir.string() +
                                  "' is not a directory; export the packages with `" + kExport + " --out " +
                                  dir.string() + " --device cuda` (or set attention.package_dir)");
    return std::make_unique<AotiAttention>(dir);
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
