"""Export attention, compiled by TorchInductor, as AOTInductor packages for attention/aoti.

    python plugins/attention/aoti/export_attention.py --out DIR [--device cuda] \
        [--dtype fp32 bf16] [--causal false true]

For each device, dtype and causal flag it writes two packages and a sidecar:
  attention_fwd_<device>_<dtype>_<full|causal>.pt2   (q, k, v) -> out
  attention_bwd_<device>_<dtype>_<full|causal>.pt2   (q, k, v, dout) -> dq, dk, dv
  attention_<device>_<dtype>_<full|causal>.json      what Inductor made of it (mechanism)
q, k, v are [batch, seq, d]; batch, both sequence lengths and d are dynamic, so one package
serves the whole grid. The forward is the textbook attention (what a user hands to
torch.compile). The backward is written out, recomputing the probabilities from q and k,
because AOTInductor compiles inference graphs only: there is no autograd inside a package.
"""
import argparse
import json
import pathlib
import re
import sys
import time
import zipfile

import torch

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def probabilities(q, k, causal):
    scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    if causal:
        lq, lk = q.shape[-2], k.shape[-2]
        future = torch.ones(lq, lk, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1)


class Forward(torch.nn.Module):
    def __init__(self, causal):
        super().__init__()
        self.causal = causal

    def forward(self, q, k, v):
        return probabilities(q, k, self.causal) @ v


class Backward(torch.nn.Module):
    """dV = P^T dO; dS = P * (dO V^T - rowsum(dO V^T * P)); dQ = dS K / sqrt(d); dK = dS^T Q / sqrt(d)."""

    def __init__(self, causal):
        super().__init__()
        self.causal = causal

    def forward(self, q, k, v, dout):
        p = probabilities(q, k, self.causal)
        dv = p.transpose(-2, -1) @ dout
        dp = dout @ v.transpose(-2, -1)
        ds = p * (dp - (dp * p).sum(dim=-1, keepdim=True))
        scale = q.shape[-1] ** -0.5
        return (ds @ k) * scale, (ds.transpose(-2, -1) @ q) * scale, dv


def mechanism(package):
    """What Inductor made of the graph, read from the package's generated wrapper: the
    library calls it kept (matmuls; an SDPA kernel if it swapped the pattern for one) and
    how many kernels it generated (Triton on CUDA, C++ loops on CPU)."""
    with zipfile.ZipFile(package) as archive:
        text = "".join(archive.read(n).decode(errors="ignore") for n in archive.namelist()
                       if n.endswith("wrapper.cpp"))
    calls = sorted({m.group(1) for m in re.finditer(r"aoti_torch_(?:cuda|cpu)_(\w+?)(?:_out)?\(", text)})
    kernels = sorted(set(re.findall(r"\b(triton_\w+|cpp_fused_\w+)\b", text)))
    kernels = [k for k in kernels if not k.endswith(("_kernel", "_impl"))] or kernels
    generated = f"{len(kernels)} generated kernel{'s' if len(kernels) != 1 else ''}"
    if kernels:
        generated += " (" + ", ".join(kernels) + ")"
    return (", ".join(calls) + " + " if calls else "") + generated


def export(module, example, dynamic, path):
    program = torch.export.export(module, example, dynamic_shapes=dynamic)
    return torch._inductor.aoti_compile_and_package(program, package_path=str(path))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="directory for the packages")
    parser.add_argument("--device", nargs="+", default=["cuda"], choices=["cuda", "cpu"])
    parser.add_argument("--skip-unavailable", action="store_true",
                        help="leave out cuda without a GPU instead of failing (for the CPU test fixture)")
    parser.add_argument("--dtype", nargs="+", default=["fp32"], choices=sorted(DTYPES))
    parser.add_argument("--causal", nargs="+", default=["false"], choices=["false", "true"])
    args = parser.parse_args()
    devices = args.device
    if "cuda" in devices and not torch.cuda.is_available():
        if not args.skip_unavailable:
            sys.exit("export_attention.py: --device cuda, but this torch sees no GPU "
                     f"(torch {torch.__version__}); run it on the GPU host or pass --device cpu")
        devices = [d for d in devices if d != "cuda"]
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    batch = torch.export.Dim("batch", min=1, max=1 << 20)
    lq = torch.export.Dim("lq", min=2, max=1 << 20)
    lk = torch.export.Dim("lk", min=2, max=1 << 20)
    d = torch.export.Dim("d", min=2, max=1024)
    qs, ks = {0: batch, 1: lq, 2: d}, {0: batch, 1: lk, 2: d}
    for device in devices:
        for dtype_name in args.dtype:
            for causal_name in args.causal:
                causal = causal_name == "true"
                tag = f"{device}_{dtype_name}_{'causal' if causal else 'full'}"
                # Example sizes distinct from each other and from 1, so no dimension specialises.
                def make(*shape):
                    return torch.randn(*shape, device=device, dtype=DTYPES[dtype_name])
                q, k, v, dout = make(3, 48, 40), make(3, 56, 40), make(3, 56, 40), make(3, 48, 40)
                started = time.time()
                fwd = export(Forward(causal), (q, k, v), {"q": qs, "k": ks, "v": ks},
                             out / f"attention_fwd_{tag}.pt2")
                bwd = export(Backward(causal), (q, k, v, dout), {"q": qs, "k": ks, "v": ks, "dout": qs},
                             out / f"attention_bwd_{tag}.pt2")
                info = {"torch": torch.__version__, "device": device, "dtype": dtype_name, "causal": causal,
                        "forward": pathlib.Path(fwd).name, "backward": pathlib.Path(bwd).name,
                        "forward_mechanism": mechanism(fwd), "backward_mechanism": mechanism(bwd),
                        "export_seconds": round(time.time() - started, 1)}
                (out / f"attention_{tag}.json").write_text(json.dumps(info, indent=1) + "\n")
                print(f"exported {tag} in {info['export_seconds']} s: forward {info['forward_mechanism']}; "
                      f"backward {info['backward_mechanism']}")


if __name__ == "__main__":
    main()
