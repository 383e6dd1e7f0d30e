#include "kernel_table.hpp"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace plugins::kernels {
namespace {

ClassRules plugin_rules(const std::string& file = "kernel_classes.yaml") {
  std::ifstream in(std::string(RUNNER_SOURCE_DIR) + "/plugins/profiler/kernels/" + file);
  std::stringstream s;
  s << in.rdbuf();
  return ClassRules::parse(s.str(), file);
}

TEST(KernelClasses, RuleTableClassesCudaKernelsAndAtenOps) {
  const ClassRules rules = plugin_rules();
  EXPECT_EQ(rules.classify("ampere_sgemm_128x64_tn"), "matmul");
  EXPECT_EQ(rules.classify("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_cublas"), "matmul");
  EXPECT_EQ(rules.classify("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_tn_align1>(Params)"), "matmul");
  EXPECT_EQ(rules.classify("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float>(float*)"),
            "reduction");
  EXPECT_EQ(rules.classify("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>()"),
            "elementwise");
  EXPECT_EQ(rules.classify("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>()"), "reduction");
  EXPECT_EQ(rules.classify("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float>()"),
            "reduction");
  EXPECT_EQ(rules.classify("void at::native::multi_tensor_apply_kernel<FusedAdamMathFunctor>()"), "elementwise");
  EXPECT_EQ(rules.classify("Memcpy HtoD (Pageable -> Device)"), "memcpy");
  EXPECT_EQ(rules.classify("Memset (Device)"), "memcpy");
  EXPECT_EQ(rules.classify("void flash_fwd_kernel<Flash_fwd_kernel_traits<64>>()"), "attention");
  EXPECT_EQ(rules.classify("aten::mm"), "matmul");
  EXPECT_EQ(rules.classify("aten::bmm"), "matmul");
  EXPECT_EQ(rules.classify("aten::_softmax"), "reduction");
  EXPECT_EQ(rules.classify("aten::add"), "elementwise");
  EXPECT_EQ(rules.classify("aten::copy_"), "memcpy");
  EXPECT_EQ(rules.classify("aten::mmx"), "other");
  EXPECT_EQ(rules.classify("some_unknown_kernel"), "other");
}

// step_classes.yaml sorts both sides of the train-step kernel diff: LibTorch + kernels/ and
// Inductor's Triton kernels (named after the ops they fused).
TEST(KernelClasses, StepRulesSplitCopiesNormOptimizerOnBothSides) {
  const ClassRules rules = plugin_rules("step_classes.yaml");
  EXPECT_EQ(rules.classes(), (std::vector<std::string>{"attention", "matmul", "optimizer", "norm", "copies",
                                                       "elementwise", "other"}));
  EXPECT_EQ(rules.classify("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda("
                           "at::TensorIteratorBase&)::{lambda()#3}>()"),
            "copies");
  EXPECT_EQ(rules.classify("void at::native::vectorized_elementwise_kernel<4, at::native::bfloat16_copy_kernel_cuda("
                           "at::TensorIteratorBase&)::{lambda(c10::BFloat16)#1}>()"),
            "copies");
  EXPECT_EQ(rules.classify("Memcpy DtoD (Device -> Device)"), "copies");
  EXPECT_EQ(rules.classify("triton_poi_fused__to_copy_0"), "copies");
  EXPECT_EQ(rules.classify("triton_poi_fused__unsafe_view_clone_transpose_3"), "copies");
  EXPECT_EQ(rules.classify("triton_poi_fused__to_copy_add_mul_silu_4"), "elementwise");
  EXPECT_EQ(rules.classify("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_1"), "norm");
  EXPECT_EQ(rules.classify("void kernels::rmsnorm::(anonymous namespace)::forward_kernel<__nv_bfloat16>()"), "norm");
  EXPECT_EQ(rules.classify("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>()"),
            "elementwise");
  EXPECT_EQ(rules.classify("void at::native::multi_tensor_apply_kernel<FusedAdamMathFunctor>()"), "optimizer");
  EXPECT_EQ(rules.classify("void kernels::adamw::(anonymous namespace)::fused_adamw_kernel<float>()"), "optimizer");
  EXPECT_EQ(rules.classify("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3"), "attention");
  EXPECT_EQ(rules.classify("nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_TNT"), "matmul");
  EXPECT_EQ(rules.classify("void kernels::cross_entropy::(anonymous namespace)::forward_kernel<float>()"), "other");
  EXPECT_EQ(rules.classify("aten::mm"), "matmul");
  EXPECT_EQ(rules.classify("aten::_to_copy"), "copies");
  EXPECT_EQ(rules.classify("aten::mul"), "elementwise");
}

TEST(KernelClasses, BadRulesNameTheRule) {
  try {
    ClassRules::parse("classes:\n  - {class: matmul, match: gemm}\n  - {class: mamtul, match: x}\n", "r.yaml");
    FAIL() << "an unknown class must be refused";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("r.yaml: classes[1]: class 'mamtul'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ClassRules::parse("classes:\n  - {class: matmul, match: \"(\"}\n", "r.yaml"), std::runtime_error);
  EXPECT_THROW(ClassRules::parse("rules: []\n", "r.yaml"), std::runtime_error);
  EXPECT_THROW(ClassRules::parse("classes:\n  - {class: matmul}\n", "r.yaml"), std::runtime_error);
}

TEST(KernelNames, ShortNamesKeepTheTellingPart) {
  EXPECT_EQ(short_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
                              "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)"),
            "vectorized_elementwise_kernel<CUDAFunctor_add>");
  EXPECT_EQ(short_kernel_name("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<"
                              "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<"
                              "float> > >(at::TensorIteratorBase&, at::native::BinaryFunctor<float, float, float, "
                              "at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)#1}>(int, "
                              "at::native::gpu_kernel_impl_nocast<int>)"),
            "elementwise_kernel<MulFunctor>");
  EXPECT_EQ(short_kernel_name("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_tn_align1>(Params)"),
            "Kernel2<cutlass_80_simt_sgemm_128x64_8x5_tn_align1>");
  // AdamW's multi-tensor kernels live in an anonymous namespace; the H100 tables showed "".
  EXPECT_EQ(short_kernel_name("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::"
                              "(anonymous namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::"
                              "BinaryOpScalarFunctor<float, 1, 1, 0>, std::multiplies<float>, float>(at::native::"
                              "(anonymous namespace)::TensorListMetadata<1>, std::multiplies<float>, float)"),
            "multi_tensor_apply_kernel<BinaryOpScalarFunctor, multiplies>");
  EXPECT_EQ(short_kernel_name("void at::native::(anonymous namespace)::cunn_SoftMaxForwardSmem<4, float, float, float, "
                              "at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue, long>(float*, float const*, "
                              "long)"),
            "cunn_SoftMaxForwardSmem<LogSoftMaxForwardEpilogue>");
  EXPECT_EQ(short_kernel_name("ampere_sgemm_128x64_tn"), "ampere_sgemm_128x64_tn");
  EXPECT_EQ(short_kernel_name("Memcpy HtoD (Pageable -> Device)"), "Memcpy HtoD (Pageable -> Device)");
  EXPECT_EQ(short_kernel_name("aten::mm"), "aten::mm");
  EXPECT_EQ(short_kernel_name(std::string(200, 'k'), 40).size(), 40u);
}

// Two measured steps on the home thread (1), a warm-up step before them, and
// backward work launched from autograd's thread (2), which has no ranges of its own.
std::vector<Span> two_steps() {
  std::vector<Span> spans = {{"warmup", 1, 0, 90}, {"step_0", 1, 0, 90}, {"measure", 1, 100, 1100}};
  for (int s = 0; s < 2; ++s) {
    const std::int64_t o = 100 + 500 * s;
    const std::vector<Span> step = {{"step_" + std::to_string(s), 1, o, o + 500},
                                    {"forward", 1, o, o + 200},
                                    {"layer0", 1, o + 5, o + 190},
                                    {"attention", 1, o + 10, o + 150},
                                    {"attention/scores", 1, o + 10, o + 50},
                                    {"attention/softmax", 1, o + 50, o + 100},
                                    {"attention/weighted_sum", 1, o + 100, o + 150},
                                    {"backward", 1, o + 200, o + 400},
                                    {"optimizer", 1, o + 400, o + 500}};
    spans.insert(spans.end(), step.begin(), step.end());
  }
  return spans;
}

std::vector<Activity> step_work() {
  std::vector<Activity> a = {{"warmup_kernel", 10, 5, 1, 10}};  // before the bracket: not counted
  for (int s = 0; s < 2; ++s) {
    const std::int64_t o = 100 + 500 * s;
    a.push_back({"ampere_sgemm_128x64_tn", o + 20, 30, 1, o + 20});            // scores
    a.push_back({"cunn_SoftMaxForward", o + 60, 10, 1, o + 60});                // softmax
    a.push_back({"ampere_sgemm_128x64_tn", o + 110, 30, 1, o + 110});           // weighted sum
    a.push_back({"vectorized_elementwise_kernel<add>", o + 170, 10, 1, o + 170});  // layer0, outside attention
    a.push_back({"ampere_sgemm_128x64_nn", o + 250, 60, 2, o + 250});           // backward, autograd thread
    a.push_back({"multi_tensor_apply_kernel", o + 420, 20, 1, o + 420});        // optimizer
  }
  return a;
}

TEST(KernelBreakdown, AttributesKernelsToPhasesAndAttentionRanges) {
  const Breakdown b = build_breakdown(step_work(), two_steps(), 1, plugin_rules(), "measure");
  EXPECT_EQ(b.steps, 2);
  ASSERT_NE(b.find("step"), nullptr);
  EXPECT_EQ(b.tables.front().phase, "step");
  EXPECT_DOUBLE_EQ(b.find("step")->total_ns, 2 * 160.0);  // the warm-up kernel is outside the bracket

  const PhaseTable* forward = b.find("forward");
  ASSERT_NE(forward, nullptr);
  EXPECT_DOUBLE_EQ(forward->total_ns, 2 * 80.0);
  ASSERT_EQ(forward->rows.size(), 3u);
  EXPECT_EQ(forward->rows[0].full_name, "ampere_sgemm_128x64_tn");
  EXPECT_DOUBLE_EQ(forward->rows[0].calls, 4);
  EXPECT_EQ(forward->rows[0].kernel_class, "matmul");
  EXPECT_DOUBLE_EQ(forward->class_ns.at("matmul"), 120.0);
  EXPECT_DOUBLE_EQ(forward->class_ns.at("reduction"), 20.0);
  EXPECT_DOUBLE_EQ(forward->class_calls.at("matmul"), 4);

  const PhaseTable* softmax = b.find("forward/attention/softmax");
  ASSERT_NE(softmax, nullptr);
  ASSERT_EQ(softmax->rows.size(), 1u);
  EXPECT_EQ(softmax->rows[0].full_name, "cunn_SoftMaxForward");
  ASSERT_NE(b.find("forward/attention/scores"), nullptr);
  EXPECT_DOUBLE_EQ(b.find("forward/attention/weighted_sum")->total_ns, 60.0);

  const PhaseTable* backward = b.find("backward");
  ASSERT_NE(backward, nullptr) << "work launched from autograd's thread belongs to the home thread's phase";
  EXPECT_DOUBLE_EQ(backward->total_ns, 120.0);
  EXPECT_DOUBLE_EQ(b.find("optimizer")->total_ns, 40.0);
  EXPECT_DOUBLE_EQ(b.span_ns.at("forward"), 400.0);
}

TEST(KernelBreakdown, RangePathPrefixesTheHomeThreadForOtherThreads) {
  std::vector<Span> spans = two_steps();
  spans.push_back({"attention/flash_backward", 2, 300, 350});
  const auto path = range_path(spans, 2, 320, 1);
  const std::vector<std::string> expected = {"measure", "step_0", "backward", "attention/flash_backward"};
  EXPECT_EQ(path, expected);
  const auto tables = tables_of(path, "measure");
  const std::vector<std::string> expected_tables = {"step", "backward", "backward/attention/flash_backward"};
  EXPECT_EQ(tables, expected_tables);
  EXPECT_TRUE(tables_of({"warmup", "step_0", "forward"}, "measure").empty());
  EXPECT_EQ(tables_of({"measure", "step_0"}, "measure"), std::vector<std::string>{"step"});
}

TEST(KernelBreakdown, AttentionFlopsCountMatmulsAndSoftmaxElements) {
  const std::vector<OpInfo> ops = {
      {"aten::bmm", 1, 120, 1000.0, 0},   // step 0 scores
      {"aten::_softmax", 1, 160, 0, 40},  // 40 score elements
      {"aten::bmm", 1, 210, 1000.0, 0},   // weighted sum
      {"aten::mm", 1, 285, 5000.0, 0},    // layer0 outside attention: not counted
      {"aten::bmm", 1, 620, 1000.0, 0},   {"aten::_softmax", 1, 660, 0, 40}, {"aten::bmm", 1, 710, 1000.0, 0}};
  const AttentionFlops f = attention_flops(ops, two_steps(), 1, "measure", "forward", 2);
  EXPECT_DOUBLE_EQ(f.matmul, 2000.0);
  EXPECT_DOUBLE_EQ(f.softmax, 200.0);
}

}  // namespace
}  // namespace plugins::kernels
