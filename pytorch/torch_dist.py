"""Joins the runner's ranks from a Python process started by task/external_python.

Under `runner launch`, torchrun or srun every runner rank starts its own copy of a
bench script; those copies form a torch.distributed group of their own through
the runner's rendezvous store (a TCPStore client at MASTER_ADDR:MASTER_PORT, keys
under a prefix of their own), so no second port is needed.
"""
import os

import torch
import torch.distributed as dist


def rank_env():
    """(rank, world_size, local_rank) from the variables the runner's launcher set."""
    if "RANK" in os.environ:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", 0))
    if "SLURM_PROCID" in os.environ:
        return (int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"]),
                int(os.environ.get("SLURM_LOCALID", 0)))
    raise SystemExit("not started by a multi-process runner (no RANK or SLURM_PROCID): use `runner launch`")


def init(prefix, backend, device):
    """torch.distributed over the runner's store; backend as init_process_group takes it."""
    rank, world_size, local_rank = rank_env()
    host = os.environ.get("MASTER_ADDR", "127.0.0.1")
    port = int(os.environ.get("MASTER_PORT", "29500"))
    store = dist.TCPStore(host, port, world_size, is_master=False)
    dist.init_process_group(backend, store=dist.PrefixStore(prefix, store), rank=rank, world_size=world_size,
                            device_id=device if device.type == "cuda" else None)
    return rank, world_size, local_rank
