"""pytorch/attention_flex.py on the CPU: its mask gives what SDPA gives with an explicit boolean mask of
the flash kernels' rule (query i sees keys i - window + 1 .. i; window 0 = causal) for windows 0, 1,
8 and one longer than the sequence; its FLOP count is the visible pairs'; run as task/external_python
runs it, it prints one record per window with the labels and metrics the report's flex tables read;
--compile-mode takes the modes it labels (and refuses max-autotune, whose CUDA graphs the events would time).

Run by ctest (pytorch.attention_flex); a few seconds.
"""
import json
import os
import statistics
import subprocess
import sys
import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import flex_attention

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "attention_flex.py")
sys.path.insert(0, HERE)
import attention_flex  # noqa: E402

warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")


def visible(seq, window):
    """The rule written out by hand, independently of the script's mask_mod."""
    return [[key <= query and (window == 0 or query - key < window) for key in range(seq)] for query in range(seq)]


def main():
    failures = []
    seq, d = 45, 16  # not a multiple of the block mask's 128: the last block is partial
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, seq, d, generator=gen, dtype=torch.float64) for _ in range(3))
    for window in (0, 1, 8, seq + 20):
        allowed = torch.tensor(visible(seq, window))
        out = flex_attention(q, k, v, block_mask=attention_flex.block_mask_for(window, seq, "cpu"))
        ref = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        err = (out - ref).abs().max().item()
        if not err < 1e-10:
            failures.append(f"window {window}: max |flex - sdpa with the mask| = {err}")
        pairs = int(allowed.sum())
        want = 4.0 * 6 * d * (seq * seq / 2 if window == 0 else pairs)  # causal: half of seq x seq, as the kernels
        got = attention_flex.forward_flops(6, seq, d, window)
        if got != want:
            failures.append(f"window {window}: forward_flops {got}, want {want}")
    if not torch.equal(flex_attention(q, k, v, block_mask=attention_flex.block_mask_for(1, seq, "cpu")), v):
        failures.append("window 1: each query sees only itself, so the output must be v")

    # As task/external_python runs it (standard flags, --model.* it must ignore, then the part's args).
    windows = [0, 1, 8, 200]
    cmd = [sys.executable, SCRIPT, "--device", "cpu", "--precision", "fp32", "--seed", "0", "--warmup", "1",
           "--steps", "3", "--repetitions", "1", "--cache", "warm", "--model", "transformer_lm",
           "--model.size", "small", "--batch", "1", "--heads", "2", "--seq", "64", "--d-head", "16",
           "--dtype", "fp32", "--windows", ",".join(map(str, windows))]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    records = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    if run.returncode != 0 or len(records) != len(windows):
        failures.append(f"exit {run.returncode}, {len(records)} records for {len(windows)} windows; "
                        f"stderr: {run.stderr[-2000:]}")
    for window, record in zip(windows, records):
        want = {"attention": "flex", "attention.kernel": "eager", "d_head": "16", "window": str(window)}
        if record.get("labels") != want:
            failures.append(f"window {window}: labels {record.get('labels')}, want {want}")
        m = record.get("metrics", {})
        missing = {"forward_ms", "forward_tflops", "compile_s", "torch_version", "mechanism", "note"} - set(m)
        if missing or "backward_ms" in m:
            failures.append(f"window {window}: metrics {sorted(m)} (missing {sorted(missing)}; no backward on CPU)")
            continue
        fwd = m["forward_ms"]["samples"]
        flops = attention_flex.forward_flops(2, 64, 16, window)
        tflops = flops / (statistics.median(fwd) * 1e-3) / 1e12
        tflops_off = abs(m["forward_tflops"]["value"] - tflops) > 1e-9 * tflops
        if len(fwd) != 3 or m["forward_ms"]["unit"] != "ms" or tflops_off:
            failures.append(f"window {window}: forward_ms {m['forward_ms']}, forward_tflops {m['forward_tflops']}")
        if record.get("measurement", {}).get("n") != 3:
            failures.append(f"window {window}: measurement {record.get('measurement')}")
    # The compile modes a part may ask for, each with its own attention.kernel label (the report's row key).
    modes = {m: attention_flex.parse_args(["--compile-mode", m]).compile_mode for m in attention_flex.COMPILE_KERNELS}
    labels = set(attention_flex.COMPILE_KERNELS.values())
    if any(k != v for k, v in modes.items()) or len(labels) != len(modes) or "eager" in labels:
        failures.append(f"--compile-mode: parsed {modes}, labels {attention_flex.COMPILE_KERNELS}")
    bad = subprocess.run([sys.executable, SCRIPT, "--device", "cpu", "--compile-mode", "max-autotune"],
                         capture_output=True, text=True, timeout=120)
    if bad.returncode == 0 or "--compile-mode" not in bad.stderr:
        failures.append(f"--compile-mode max-autotune (CUDA graphs would time replays): exit {bad.returncode}, "
                        f"stderr {bad.stderr[-300:]!r}")
    for failure in failures:
        print("FAIL", failure)
    print("ok" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
