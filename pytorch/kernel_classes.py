"""Kernel classes of a profiled step, as profiler/kernels' C++ plugin counts them: its class
rules (kernel_classes.yaml, step_classes.yaml), the units of device work in a torch.profiler
profile, and the per-step metrics (kernel_ms, kernels_per_step, <class>_kernel_ms,
<class>_kernels, share_<class>). Shared by pytorch/train_step_pytorch.py (--profile-steps) and
pytorch/kernels_torch_profiler.py, neither of which imports the other for it.
"""
import re

import torch


def load_class_rules(path):
    """profiler/kernels' class rules (kernel_classes.yaml, step_classes.yaml): [(class, regex)] and the
    classes in order of first appearance, "other" last, as the C++ plugin reads them."""
    import yaml
    with open(path) as f:
        doc = yaml.safe_load(f)
    rules = [(r["class"], re.compile(r["match"], re.IGNORECASE)) for r in doc["classes"]]
    classes = []
    for name, _ in rules:
        if name != "other" and name not in classes:
            classes.append(name)
    return rules, classes + ["other"]


def classify(name, rules):
    return next((cls for cls, regex in rules if regex.search(name)), "other")


def device_work(events, cuda):
    """(name, µs) of every unit of work in the profile: on CUDA each kernel, memcpy and memset (also
    those a CUDA graph replay launched, which no op owns); on a CPU each op's self time."""
    if cuda:
        return [(e.name, e.time_range.elapsed_us()) for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
    return [(e.name, e.self_cpu_time_total) for e in events
            if e.device_type == torch.autograd.DeviceType.CPU and e.name.startswith("aten::")]


def class_metrics(work, rules, classes, steps):
    """Per profiled step: kernel_ms, kernels_per_step and <class>_kernel_ms, <class>_kernels, share_<class>,
    the metrics profiler/kernels records for its `step` phase."""
    ms = dict.fromkeys(classes, 0.0)
    calls = dict.fromkeys(classes, 0)
    for name, us in work:
        cls = classify(name, rules)
        ms[cls] += us / 1e3
        calls[cls] += 1
    total = sum(ms.values())
    metrics = {"kernel_ms": {"unit": "ms/step", "value": total / steps},
               "kernels_per_step": {"unit": "calls/step", "value": sum(calls.values()) / steps}}
    for cls in classes:
        metrics[f"{cls}_kernel_ms"] = {"unit": "ms/step", "value": ms[cls] / steps}
        metrics[f"{cls}_kernels"] = {"unit": "calls/step", "value": calls[cls] / steps}
        metrics[f"share_{cls}"] = {"unit": "%", "value": 100.0 * ms[cls] / total if total else 0.0}
    return metrics
