#!/usr/bin/env python3
"""Fits the bucketed-DDP overhead model to ddp_benchmarking records and derives the
best bucket size (ddp_bucketed_benchmarking (b)).

Model: with n_b equal buckets of a total s gradient bytes, bandwidth w and a fixed cost
o per all-reduce call, what backward cannot hide is the last bucket's transfer (it
starts only when backward ends) plus the calls' fixed costs:
    overhead(n_b) = o * n_b + s / (n_b * w)
Minimised at n_b* = sqrt(s / (w o)), i.e. bucket size b* = s / n_b* = sqrt(s w o).
overhead is measured as step(bucketed) - step(one GPU, same per-GPU batch); o and 1/w
come from least squares on the points (linear in the two unknowns). A second fit adds
a constant c (a cost independent of bucketing, e.g. backward kernels slowed by NCCL
kernels sharing the SMs): overhead = c + o n_b + s / (n_b w).

  scripts/figures/bucket_model.py <results.jsonl>      prints a Markdown table and the fit
Standard library only.
"""
import json
import math
import sys


def aggregate_records(path):
    for line in open(path):
        r = json.loads(line)
        if r.get("status") == "ok" and "rank" not in r.get("labels", {}):
            yield r


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    single, points, params = None, [], None
    for r in aggregate_records(sys.argv[1]):
        m, p = r["metrics"], r["params"]
        if r["part"] == "single_gpu" and "step_ms" in m:
            single = m["step_ms"]["mean"]
            params = m["parameters"]["value"]
        if r["part"] == "bucketed" and "step_ms" in m:
            points.append((p["ddp.bucket_size_mb"], m["buckets"]["value"], m["step_ms"]["mean"]))
    if single is None or len(points) < 2:
        sys.exit("need the single_gpu point and two or more bucketed points")
    s = params * 4  # fp32 gradient bytes
    # least squares for overhead = o * n + (s / w) * (1 / n): unknowns o, k = s / w
    rows = [(n, 1.0 / n, step - single) for _, n, step in points]
    a11 = sum(x * x for x, _, _ in rows); a12 = sum(x * z for x, z, _ in rows); a22 = sum(z * z for _, z, _ in rows)
    b1 = sum(x * y for x, _, y in rows); b2 = sum(z * y for _, z, y in rows)
    det = a11 * a22 - a12 * a12
    o_ms = (b1 * a22 - b2 * a12) / det
    k_ms = (a11 * b2 - a12 * b1) / det
    print("| bucket (MiB) | buckets n_b | step (ms) | overhead vs 1 GPU (ms) | model (ms) |")
    print("|---:|---:|---:|---:|---:|")
    for (mb, n, step), (_, _, over) in zip(points, rows):
        print(f"| {mb:g} | {n:g} | {step:.1f} | {over:.1f} | {o_ms * n + k_ms / n:.1f} |")
    print()
    print(f"s = {s / 2**20:.0f} MiB of fp32 gradients; one-GPU step {single:.1f} ms")
    if len(rows) >= 3:
        fit_with_constant(rows, s)
    if o_ms > 0 and k_ms > 0:
        w = s / (k_ms * 1e-3)
        n_best = math.sqrt(k_ms / o_ms)
        print(f"fit: o = {o_ms * 1e3:.0f} us per all-reduce, w = {w / 1e9:.0f} GB/s (effective, exposed part)")
        print(f"best: n_b* = sqrt(s/(w o)) = {n_best:.1f} buckets, b* = sqrt(s w o) = {s / n_best / 2**20:.0f} MiB,"
              f" predicted overhead {2 * math.sqrt(o_ms * k_ms):.1f} ms")
    else:
        print(f"fit: o = {o_ms:.3f} ms, s/w = {k_ms:.3f} ms: a non-positive term; the overhead is not resolved by"
              " these points (differences within noise)")


def solve3(m, v):
    def det(a):
        return (a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1]) - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0])
                + a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]))
    d = det(m)
    out = []
    for col in range(3):
        a = [row[:] for row in m]
        for r in range(3):
            a[r][col] = v[r]
        out.append(det(a) / d)
    return out


def fit_with_constant(rows, s):
    feats = [(1.0, n, 1.0 / n, y) for n, _, y in rows]
    m = [[sum(f[i] * f[j] for f in feats) for j in range(3)] for i in range(3)]
    v = [sum(f[i] * f[3] for f in feats) for i in range(3)]
    c, o, k = solve3(m, v)
    print(f"fit with a constant: c = {c:.1f} ms, o = {o * 1e3:.0f} us per all-reduce, s/w = {k:.1f} ms"
          + (f" (w = {s / (k * 1e-3) / 1e9:.0f} GB/s)" if k > 0 else ""))
    for n, _, y in rows:
        print(f"  n_b = {n:g}: measured {y:.1f} ms, model {c + o * n + k / n:.1f} ms")
    if o > 0 and k > 0:
        n_best = math.sqrt(k / o)
        print(f"  best: n_b* = {n_best:.1f}, b* = {s / n_best / 2**20:.0f} MiB, overhead {c + 2 * math.sqrt(o * k):.1f} ms")


if __name__ == "__main__":
    main()
