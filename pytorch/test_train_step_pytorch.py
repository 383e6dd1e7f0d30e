"""pytorch/train_step_pytorch.py --compile-scope blocks on the CPU: the regionally compiled
step computes what the eager step computes, and Dynamo makes the same few graphs however
deep the model is (one block graph reused by every layer, the final norm, the loss).
--kernel-classes: the profiled step's ops are split into step_classes.yaml's classes.

Run by ctest (pytorch.train_step_compile_scope); about a minute on 2 cores.
"""
import json
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "train_step_pytorch.py")


def run(layers, *extra, env=None):
    cmd = [sys.executable, SCRIPT, "--device", "cpu", "--model.size", "custom", "--model.d_model", "32",
           "--model.d_ff", "64", "--model.num_layers", str(layers), "--model.num_heads", "2",
           "--model.context_length", "16", "--model.vocab_size", "256", "--warmup", "2", "--steps", "3",
           "--sdpa", "--fused-adamw", *extra]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    record = json.loads(out.strip().splitlines()[-1])
    return record["labels"]["pytorch_variant"], {k: v.get("value") for k, v in record["metrics"].items()}


def main():
    failures = []
    rules = os.path.join(os.path.dirname(SCRIPT), "..", "plugins", "profiler", "kernels", "step_classes.yaml")
    eager_variant, eager = run(5, "--kernel-classes", rules, "--profile-steps", "1")
    # The two compiled runs share Inductor's caches in a fresh directory of this test: the 5-layer
    # run compiles cold, the 9-layer one reuses its kernels (the same block, norm and loss graphs),
    # which saves a cold compile of the same graphs. Dynamo still traces every layer, so
    # compiled_graphs counts what it made at 9 layers. (The default --compile-cache cold runs in
    # smoke.torch_compile_model.)
    with tempfile.TemporaryDirectory(prefix="compile-scope-test-") as cache:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache, TRITON_CACHE_DIR=os.path.join(cache, "triton"))
        shared = ("--compile", "--compile-scope", "blocks", "--compile-cache", "shared")
        blocks_variant, blocks = run(5, *shared, env=env)
        _, deeper = run(9, *shared, env=env)
    if blocks_variant != "compile(default,blocks)+sdpa+fused_adamw" or eager_variant != "eager+sdpa+fused_adamw":
        failures.append(f"variant labels: {eager_variant!r}, {blocks_variant!r}")
    # After 5 steps (2 warm-up, 3 measured) of AdamW the compiled step's loss is the eager one's.
    for key in ("loss_first", "loss_last"):
        if abs(blocks[key] - eager[key]) > 1e-5 * abs(eager[key]):
            failures.append(f"{key}: blocks {blocks[key]} vs eager {eager[key]}")
    if blocks["compiled_graphs"] != 3 or deeper["compiled_graphs"] != 3:
        failures.append(f"compiled_graphs: {blocks['compiled_graphs']} at 5 layers, {deeper['compiled_graphs']} "
                        "at 9 (want 3 each: block, final norm, loss)")
    # --kernel-classes: every profiled op lands in exactly one class; a step has matmuls and attention.
    classes = ("attention", "matmul", "optimizer", "norm", "copies", "elementwise", "other")
    by_class = sum(eager[f"{c}_kernel_ms"] for c in classes)
    if abs(by_class - eager["kernel_ms"]) > 1e-6 * eager["kernel_ms"] or not eager["kernel_ms"] > 0:
        failures.append(f"class times sum to {by_class}, kernel_ms {eager['kernel_ms']}")
    if sum(eager[f"{c}_kernels"] for c in classes) != eager["kernels_per_step"]:
        failures.append("class kernel counts do not sum to kernels_per_step")
    if not (eager["matmul_kernels"] > 0 and eager["attention_kernels"] > 0 and eager["optimizer_kernels"] > 0):
        failures.append(f"kernel classes: {({c: eager[c + '_kernels'] for c in classes})}")
    if "compiled_graphs" in eager or not eager["first_step_s"] > 0:
        failures.append(f"eager record: {eager}")
    for failure in failures:
        print("FAIL", failure)
    print("ok" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
