"""torch.ops.runner_flash against torch.nn.functional.scaled_dot_product_attention.

Runs under pytest or as a script (ctest runs it so; RUNNER_FLASH_OPS_LIB names the .so).
The tiled tensor-op version is checked on the CPU; the CUDA kernels when a GPU is present.
"""
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runner_flash_attention as rfa  # noqa: E402

rfa.load()
SEED = int(time.time_ns() % 1_000_003)
print(f"seed {SEED}")


def rel_err(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def compare(fn, dtype, device, causal, shape=(2, 3, 77, 64), tol=1e-5):
    torch.manual_seed(SEED)
    q, k, v, dout = (torch.randn(shape, device=device) for _ in range(4))
    leaves = [t.to(dtype).requires_grad_(True) for t in (q, k, v)]
    out = fn(*leaves, causal=causal)
    out.backward(dout.to(dtype))
    refs = [t.detach().float().requires_grad_(True) for t in leaves]
    ref = F.scaled_dot_product_attention(*refs, is_causal=causal)
    ref.backward(dout.to(dtype).float())
    errors = [rel_err(out, ref)] + [rel_err(a.grad, b.grad) for a, b in zip(leaves, refs)]
    assert max(errors) < tol, f"seed {SEED} dtype {dtype} causal {causal}: out/dq/dk/dv errors {errors}"


def test_tiled_matches_sdpa_on_cpu():
    for causal in (False, True):
        compare(rfa.tiled_flash_attention, torch.float32, "cpu", causal)
        compare(lambda q, k, v, causal: rfa.tiled_flash_attention(q, k, v, causal, 16, 32),
                torch.float32, "cpu", causal, shape=(1, 2, 45, 16))


def test_kernel_rejects_cpu_tensors_with_one_clear_error():
    q = torch.randn(1, 2, 8, 64)
    try:
        rfa.flash_attention(q, q, q)
    except RuntimeError as e:
        assert "must be CUDA tensors" in str(e), str(e)
    else:
        raise AssertionError("CPU tensors were accepted")


def test_kernels_match_sdpa_on_cuda():
    if not torch.cuda.is_available():
        print("skipped: no CUDA device")
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    for causal in (False, True):
        for d in (16, 32, 64, 80, 96, 128):
            compare(rfa.flash_attention, torch.float32, "cuda", causal, shape=(2, 3, 77, d), tol=2e-3)
            compare(rfa.flash_attention, torch.bfloat16, "cuda", causal, shape=(2, 3, 77, d), tol=2e-2)
    q = torch.randn(1, 2, 16, 100, device="cuda")
    try:
        rfa.flash_attention(q, q, q)
    except RuntimeError as e:
        assert "head dim 100 is not supported" in str(e), str(e)
    else:
        raise AssertionError("head dim 100 was accepted")


def test_wgmma_kernels_match_sdpa_on_hopper():
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        print("skipped: no sm_90 GPU")
        return
    for causal in (False, True):
        for d in (64, 80, 96, 128):
            for dtype in (torch.bfloat16, torch.float16):
                compare(lambda q, k, v, causal: rfa.flash_attention(q, k, v, causal, kernel="wgmma"),
                        dtype, "cuda", causal, shape=(2, 3, 200, d), tol=2e-2)
    q = torch.randn(1, 2, 16, 32, device="cuda", dtype=torch.float32)
    try:
        rfa.flash_attention(q, q, q, kernel="wgmma")
    except RuntimeError as e:
        assert "take bf16 or fp16" in str(e), str(e)
    else:
        raise AssertionError("wgmma with fp32 was accepted")


if __name__ == "__main__":
    for name, fn in sorted(globals().items()):
        if name.startswith("test_") and callable(fn):
            fn()
            print(f"ok {name}")
