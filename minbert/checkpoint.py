"""Training checkpoints that never lose work.

`save(path, state)` writes with torch.save to a temporary file in the same folder and renames
it into place (os.replace is atomic on POSIX and Windows), so a crash or Ctrl-C during the
write leaves the previous checkpoint intact, never a truncated one. `load(path)` gives a
clear error for a missing or unreadable file.

What a resumable state holds (train_multitask.py builds it): model, optimizer, LR scheduler,
GradScaler, task sampler and batch-stream positions, every RNG state, the epoch/step counters,
the best score so far, and the run's arguments (vars(args)). Model weights are saved from the
plain module (never a torch.compile or DDP wrapper), so no `_orig_mod.`/`module.` prefixes.
"""

from pathlib import Path

import torch

from . import distributed
from .errors import UserError
from .model import atomic_write


def save(path, state: dict) -> None:
    """Under torchrun only rank 0 writes: every rank holds the same weights, and `state` itself
    must still be built on all ranks (distributed.gather_rng is collective). Every rank calls save
    and returns once the file is in place, so no rank reads it back (--resume) before it exists."""
    if distributed.is_main():
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda tmp: torch.save(state, tmp))
    distributed.barrier()


def load(path, map_location="cpu") -> dict:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such checkpoint file")
    try:
        # weights_only=False: our own checkpoints hold Python RNG states and argparse values.
        return torch.load(path, map_location=map_location, weights_only=False)
    except Exception as e:  # truncated or foreign file
        raise UserError(f"{path}: not a readable minbert checkpoint ({type(e).__name__}: {e})") from None


def load_for_resume(args, may_differ: set, script: str) -> dict:
    """Load --resume for `script` and refuse what cannot continue this command: a file that is no
    checkpoint of this script, a weights-only file (best.pt) unless --predict_only, and a checkpoint
    trained with other flags than `args` (those in `may_differ` say where things are, not what is
    trained, and may change). Flags left at None take the checkpoint's value."""
    ck = load(args.resume)
    if "model" not in ck:
        raise UserError(f"--resume {args.resume}: no 'model' key; not a checkpoint written by {script}")
    if args.predict_only:
        return ck
    if "optimizer" not in ck:
        last = Path(args.resume).parent / "last.pt"
        raise UserError(f"--resume {args.resume} holds only a model's weights (best.pt keeps no optimizer, schedule or "
                        f"data position), so training cannot continue from it. Continue training with --resume {last} "
                        f"(or interrupted.pt); use its weights with --predict_only --resume {args.resume}")
    saved, now = ck.get("args", {}), vars(args)
    for k, v in now.items():
        if v is None and saved.get(k) is not None:   # e.g. train_mml's --epochs: the paper's rule, resolved then
            setattr(args, k, saved[k])
    diff = [f"  --{k}: checkpoint {saved.get(k)!r}, this command {now.get(k)!r}"
            for k in sorted(set(saved) | set(now)) if k not in may_differ and saved.get(k) != now.get(k)]
    if diff:
        raise UserError(f"--resume {args.resume} was trained with other flags; an exact resume needs the same ones:\n"
                        + "\n".join(diff) + "\nRerun with the checkpoint's values, or start a new run without --resume.")
    return ck
