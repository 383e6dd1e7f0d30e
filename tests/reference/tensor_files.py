"""Tensor exchange with the C++ tests: a folder holding index.txt and one raw
little-endian file per tensor. index.txt has one line per tensor:
    <name> <dtype: float32|float64|int64> <shape: d0,d1,... or - for a scalar>
and the tensor's bytes are in <name>.bin."""
import os

import torch

_DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64}


def read_tensors(folder):
    tensors = {}
    with open(os.path.join(folder, "index.txt")) as index:
        for line in index:
            if not line.strip():
                continue
            name, dtype, shape = line.split()
            dims = [] if shape == "-" else [int(d) for d in shape.split(",")]
            with open(os.path.join(folder, name + ".bin"), "rb") as f:
                data = bytearray(f.read())
            flat = torch.frombuffer(data, dtype=_DTYPES[dtype]) if data else torch.empty(0, dtype=_DTYPES[dtype])
            tensors[name] = flat.reshape(dims).clone()
    return tensors


def write_tensors(folder, tensors):
    os.makedirs(folder, exist_ok=True)
    names = {v: k for k, v in _DTYPES.items()}
    with open(os.path.join(folder, "index.txt"), "w") as index:
        for name, t in tensors.items():
            t = t.detach().contiguous().cpu()
            shape = ",".join(str(d) for d in t.shape) if t.dim() else "-"
            index.write(f"{name} {names[t.dtype]} {shape}\n")
            with open(os.path.join(folder, name + ".bin"), "wb") as f:
                # Through uint8 so that no numpy is needed; the tensors here are small.
                f.write(bytes(t.reshape(-1).view(torch.uint8).tolist()))
