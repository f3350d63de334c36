"""Data parallelism across processes: torchrun + DistributedDataParallel, all in this one file.

N ranks, each with a full copy of the model, train on disjoint rows of one global batch and average their gradients
before every optimizer step (PyTorch DDP, Li et al., arXiv:2006.15704). A run not started by torchrun takes none of
this code: `setup` returns the device and every helper is the identity. What each piece does under torchrun (setup,
`ShardedStream`, `Sync`, `on_main`, `gather_rng`, `any_rank`), what was tested and what is left out: docs/scaling.md.
"""

import atexit
import datetime
import os
import sys
from contextlib import nullcontext

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from minbert.core.device import pick_device
from minbert.core.errors import UserError
from minbert.tasks.sampling import BatchStream


def launched() -> bool:
    """True when torchrun (or a test acting like it) started this process."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def active() -> bool:
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    return dist.get_rank() if active() else 0


def world_size() -> int:
    return dist.get_world_size() if active() else 1


def is_main() -> bool:
    return rank() == 0


def setup(device_name: str) -> torch.device:
    """The device to train on; under torchrun, also join the process group (once per process)."""
    device = pick_device(device_name)
    if not launched():
        return device
    if device.type == "cuda":   # one GPU per process, chosen by torchrun's LOCAL_RANK
        local_ranks, gpus = int(os.environ.get("LOCAL_WORLD_SIZE", 1)), torch.cuda.device_count()
        if local_ranks > gpus:   # every rank says so and exits; else rank 0 would wait for the others for an hour
            raise UserError(f"torchrun started {local_ranks} processes on this machine but it has {gpus} GPU(s), and "
                            f"each process trains on its own GPU: use --nproc_per_node {gpus}, or --device cpu")
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    if not active():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", timeout=datetime.timedelta(minutes=60))
        atexit.register(lambda: dist.destroy_process_group() if active() else None)   # a clean exit, no warning
    if not is_main():
        sys.stdout = open(os.devnull, "w")   # rank 0 alone prints; stderr (errors) stays
    return device


def barrier() -> None:
    """Wait for every rank (nothing in a single process)."""
    if active():
        dist.barrier()


# ----------------------------------------------------------------------------------------------------------- gradients
class _LossPassThrough(nn.Module):
    """DDP only watches `forward`: this one returns the finished loss unchanged, so DDP walks the graph from it, and
    holding `model` gives DDP its parameters (broadcast from rank 0 at construction: the same start everywhere)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, loss):
        return loss


class Sync:
    """What the training loops call; with world size 1 every method is the identity.

        sync = Sync(model, device)
        loss = sync.before_backward(loss, last=micro == grad_accum - 1);  loss.backward()
        with sync.no_sync(): surgery.accumulate(...)          then sync.task_grads(surgery)
    """

    def __init__(self, model: nn.Module, device: torch.device):
        self.ddp = None
        if active():
            # broadcast_buffers=False: buffers (MML's β and moving averages, R4F's power-iteration
            # vectors) are kept equal by the rules in the module docstring, not overwritten by rank 0.
            self.ddp = DistributedDataParallel(_LossPassThrough(model),
                                               device_ids=[device.index] if device.type == "cuda" else None,
                                               find_unused_parameters=True, broadcast_buffers=False)

    def before_backward(self, loss: torch.Tensor, last: bool = True) -> torch.Tensor:
        """The loss to call backward on. last=False (an earlier micro-batch of a gradient-
        accumulation step): gradients accumulate locally, averaged with the last micro-batch."""
        if self.ddp is None:
            return loss
        with nullcontext() if last else self.ddp.no_sync():
            return self.ddp(loss)

    def no_sync(self):
        """Backward passes whose gradients DDP must not average (PCGrad's per-task passes)."""
        return nullcontext() if self.ddp is None else self.ddp.no_sync()

    def task_grads(self, surgery) -> None:
        """Average PCGrad/GradVac's per-task gradients over the ranks, before apply(): K·P floats,
        flattened into one buffer per task so it is one all-reduce per task, not one per param."""
        if self.ddp is None or surgery.grads is None:
            return
        # A task's graph reaches the same params on every rank (same model, same task), but make
        # sure: a param used on any rank counts as used everywhere (its gradient is 0 elsewhere).
        used = surgery.used.to(surgery.params[0].device, torch.uint8)   # nccl reduces CUDA tensors only
        dist.all_reduce(used, op=dist.ReduceOp.MAX)
        surgery.used = used.bool().cpu()
        for k, row in enumerate(surgery.grads):
            for n in range(len(row)):
                if surgery.used[k, n] and row[n] is None:
                    row[n] = torch.zeros_like(surgery.params[n], dtype=torch.float32)
            present = [g for g in row if g is not None]
            if not present:
                continue
            flat = torch.cat([g.reshape(-1) for g in present])          # (P_k,) this task's grads
            dist.all_reduce(flat)
            averaged = iter((flat / world_size()).split([g.numel() for g in present]))
            row[:] = [None if g is None else next(averaged).view_as(g) for g in row]


def mean_over_ranks(x: torch.Tensor) -> torch.Tensor:
    """The mean of a tensor over all ranks (a copy; the input is unchanged). Identity alone."""
    if not active():
        return x
    x = x.detach().clone()
    dist.all_reduce(x)
    return x / world_size()


def any_rank(flag: bool) -> bool:
    """True on every rank if it is true on any: a stop request, a non-finite loss."""
    if not active():
        return flag
    t = torch.tensor([int(flag)], device="cuda" if dist.get_backend() == "nccl" else "cpu")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


# ---------------------------------------------------------------------------------------------------------------- data
def shard_batch(batch: dict, rank: int, world: int) -> dict:
    """Rows rank, rank + world, … of a global batch, then the padding no kept row needs trimmed.
    Padded positions are masked, so a trimmed row gives the same outputs as the untrimmed one."""
    B = len(batch["ids"])
    rows = list(range(rank, B, world)) or [rank % B]   # a global batch smaller than the world
    index = torch.tensor(rows)
    out = {k: [v[i] for i in rows] if isinstance(v, list) else v[index] for k, v in batch.items()}
    for suffix in ("", "_b"):
        if f"attention_mask{suffix}" in out:
            T = int(out[f"attention_mask{suffix}"].sum(1).max())            # longest kept row
            for name in ("input_ids", "attention_mask", "token_type_ids"):
                out[name + suffix] = out[name + suffix][:, :T]              # (b, T_global) -> (b, T)
    return out


class ShardedStream:
    """A BatchStream of global batches (batch_size × world examples) that returns this rank's
    share. State (passes, position) is the global stream's, the same on every rank."""

    def __init__(self, stream):
        self.stream, self.rank, self.world = stream, rank(), world_size()

    def next(self) -> dict:
        return shard_batch(self.stream.next(), self.rank, self.world)

    def state_dict(self) -> dict:
        return self.stream.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.stream.load_state_dict(state)


def stream(data, batch_size: int, seed: int):
    """BatchStream(data, batch_size, seed) alone; under torchrun each rank's share of a global one."""
    if not active():
        return BatchStream(data, batch_size, seed)
    return ShardedStream(BatchStream(data, batch_size * world_size(), seed))


# ------------------------------------------------------------------------------------------ evaluation and checkpoints
def on_main(fn):
    """fn() on rank 0 alone; its (picklable) result is broadcast, so every rank returns it."""
    if not active():
        return fn()
    box = [fn() if is_main() else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def gather_rng(snapshot: dict) -> dict:
    """`snapshot` ({'rng': this rank's RNG state, ...}) with every rank's added as 'rng_ranks' (collective); 'rng'
    stays rank 0's, so a single process can still resume from it."""
    if not active():
        return snapshot
    states = [None] * world_size()
    dist.all_gather_object(states, snapshot["rng"])
    return {**snapshot, "rng_ranks": states}


def own_rng(checkpoint: dict) -> dict:
    """This rank's RNG state from a checkpoint (rank 0's when the world size changed)."""
    states = checkpoint.get("rng_ranks")
    if active() and states is not None and len(states) == world_size():
        return states[rank()]
    return checkpoint["rng"]
