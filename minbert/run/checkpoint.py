"""Training checkpoints: one resumable state, written atomically, read without running code.

`TrainState` is everything a resume needs, for both scripts: the objects that have a state_dict
(model, optimizer, LR scheduler, GradScaler, task sampler, batch streams, SMART's teacher, the
surgery's targets and generator), the position (epoch, step), the best score so far, the
per-epoch history and running loss sums, every RNG state, and the run's flags as JSON. The
training loop walks it: `state.epochs(n)` and `state.steps(n, stop)` yield positions and
remember them, `state.saved_on_interrupt(...)` turns a Ctrl-C into `interrupted.pt` at the last
step boundary (minbert/core/interrupt.py), and `state.end_epoch(...)` writes `last.pt`.

Files are written with `atomic_write` (a crash mid-write leaves the previous file) and read
with `torch.load(weights_only=True)`: tensors, numbers, strings, lists and dicts only, so a
checkpoint someone shares cannot run code when it is loaded (a pickle can). Numpy's RNG state
is stored as a tensor for that reason, and the flags as a JSON string. Weights are saved from
the plain module (never a torch.compile or DDP wrapper), so no `_orig_mod.`/`module.` prefixes.
"""

import json
import math
import os
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from minbert.core import interrupt, progress
from minbert.run import distributed
from minbert.core.atomic import atomic_write
from minbert.core.device import rng_state, set_rng_state
from minbert.core.errors import UserError
from minbert.core.report import write_jsonl

# Flags that may differ between a run and its --resume: where things are, not what is trained.
WHERE = {"resume", "predict_only", "out_dir", "device", "use_gpu", "amp", "data_dir", "data_notes", "glue_dir",
         "eval_tasks", "dry_run", "overwrite", "keep_resume_state", "log_every", "log_seconds", "handout_headers",
         "fast_paths",
         *(f"{t}_{s}{o}" for t in ("sst", "para", "sts") for s in ("train", "dev", "test") for o in ("", "_out"))}


def add_args(parser, out_dir: str) -> None:
    g = parser.add_argument_group("run folder and resume")
    g.add_argument("--out_dir", default=out_dir, help="where the run writes: checkpoints, metrics.jsonl, model/, plots")
    g.add_argument("--resume", default=None, help="continue from OUT_DIR/last.pt or interrupted.pt of this script")
    g.add_argument("--predict_only", action="store_true",
                   help="no training: write the predictions/scores of the model in --resume (best.pt or last.pt)")


def check_args(args, parser) -> None:
    if args.predict_only and not args.resume:
        parser.error(f"--predict_only needs --resume CHECKPOINT (e.g. {args.out_dir}/best.pt)")


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
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # a pickled object (refused: it could run code), a truncated or foreign file
        if "Unsupported global" in str(e):
            raise UserError(f"{path}: holds pickled Python objects, not only tensors and numbers; minbert never "
                            "writes those, and loading them could run someone else's code, so it is refused. "
                            "Use checkpoints written by this version of minbert.") from None
        raise UserError(f"{path}: not a readable minbert checkpoint ({type(e).__name__}: {e})") from None


def save_weights(path, model, args, **info) -> None:
    """best.pt: the model's weights, the flags (JSON) and `info` (e.g. scores); no resume state."""
    save(path, {"model": model.state_dict(), "args": json.dumps(vars(args)), **info})


def saved_args(ck: dict) -> dict:
    return json.loads(ck.get("args") or "{}")


def load_for_resume(args, script: str) -> dict:
    """Load --resume for `script` and refuse what cannot continue this command: a file that is no
    checkpoint of this script, a weights-only file (best.pt) unless --predict_only, and a checkpoint
    trained with other flags than `args` (those in WHERE say where things are, not what is
    trained, and may change). Flags left at None take the checkpoint's value."""
    ck = load(args.resume)
    if "model" not in ck:
        raise UserError(f"--resume {args.resume}: no 'model' key; not a checkpoint written by {script}")
    if args.predict_only:
        return ck
    if "optimizer" not in ck:
        last = Path(args.resume).parent / "last.pt"
        raise UserError(f"--resume {args.resume} holds only a model's weights (best.pt keeps no optimizer, schedule or "
                        f"data position), so training cannot continue from it. Continue an unfinished run with "
                        f"--resume {last} "
                        f"(or interrupted.pt; a finished run keeps last.pt only with --keep_resume_state); use these "
                        f"weights with --predict_only --resume {args.resume}")
    saved, now = saved_args(ck), json.loads(json.dumps(vars(args)))   # tuples become lists, as in the file
    for k, v in now.items():
        if v is None and saved.get(k) is not None:   # e.g. train_mml's --epochs: the paper's rule, resolved then
            setattr(args, k, saved[k])
            now[k] = saved[k]
    diff = [f"  --{k}: checkpoint {saved.get(k)!r}, this command {now.get(k)!r}"
            for k in sorted(set(saved) | set(now)) if k not in WHERE and saved.get(k) != now.get(k)]
    if diff:
        raise UserError(f"--resume {args.resume} was trained with other flags; an exact resume needs the same ones:\n"
                        + "\n".join(diff)
                        + "\nRerun with the checkpoint's values, or start a new run without --resume.")
    return ck


def _to_tensors(state):
    """Numpy arrays (numpy's RNG keys) as tensors, so weights_only loading accepts them."""
    if isinstance(state, np.ndarray):
        return {"ndarray": torch.from_numpy(state.copy()), "dtype": str(state.dtype)}
    if isinstance(state, dict):
        return {k: _to_tensors(v) for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(_to_tensors(v) for v in state)
    return state


def _from_tensors(state):
    if isinstance(state, dict) and set(state) == {"ndarray", "dtype"}:
        return state["ndarray"].numpy().astype(state["dtype"])
    if isinstance(state, dict):
        return {k: _from_tensors(v) for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(_from_tensors(v) for v in state)
    return state


class TrainState:
    """The run's resumable state; `parts` are objects with state_dict/load_state_dict (None: a method that
    is off; a list: one per task)."""

    def __init__(self, args, running, **parts):
        self.args, self.parts = args, parts
        self.epoch, self.step, self.best, self.history = 1, 0, -math.inf, []
        self.running, self._fresh_running = running, json.dumps(running)   # this epoch's loss sums
        self.extra = {}      # script-specific lists (train_mml: the head trace and elimination events)
        self.bar = None

    def state_dict(self) -> dict:
        def one(obj):
            return [o.state_dict() for o in obj] if isinstance(obj, list) else None if obj is None else obj.state_dict()
        return {**{name: one(obj) for name, obj in self.parts.items()},
                **_to_tensors(distributed.gather_rng({"rng": rng_state()})),
                "epoch": self.epoch, "step": self.step, "best": self.best, "history": self.history,
                "running": self.running, "extra": self.extra, "args": json.dumps(vars(self.args))}

    def load_state_dict(self, ck: dict) -> None:
        for name, obj in self.parts.items():
            if obj is None or ck.get(name) is None:
                continue
            for o, s in zip(obj, ck[name]) if isinstance(obj, list) else [(obj, ck[name])]:
                o.load_state_dict(s)
        set_rng_state(_from_tensors(distributed.own_rng(ck)))
        self.epoch, self.step, self.best, self.history = ck["epoch"], ck["step"], ck["best"], ck["history"]
        self.running, self.extra = ck["running"], ck["extra"]
        print(f"resumed from {self.args.resume}: epoch {self.epoch}, step {self.step}, best {self.best:.4f}")

    # -------------------------------------------------------------- the loop's positions
    def epochs(self, num_epochs: int):
        """The epochs still to run; the caller ends each with end_epoch()."""
        while self.epoch <= num_epochs:
            yield self.epoch

    def steps(self, num_steps: int, stop, examples_per_step: int | None = None):
        """The steps of this epoch still to run, with a progress bar (log lines when not on a terminal:
        minbert/core/progress.py); a Ctrl-C during a step stops at the next."""
        self.bar = progress.bar(range(self.step, num_steps), self.epoch, self.args.epochs, num_steps, self.step,
                                disable=not distributed.is_main(), args=self.args, examples_per_step=examples_per_step)
        for step in self.bar:
            self.step = step
            stop.check()
            yield step
        self.step = num_steps

    def show(self, **numbers) -> None:
        self.bar.set_postfix({k: f"{v:.3f}" if isinstance(v, float) else v for k, v in numbers.items()})

    def end_epoch(self, record: dict, score: float, model, scores: dict) -> None:
        """Log the epoch, keep best.pt when `score` is the best so far, save last.pt at the next epoch's start."""
        self.history.append(record)
        if distributed.is_main():   # rank 0 alone writes files (save() checks it itself)
            write_jsonl(os.path.join(self.args.out_dir, "metrics.jsonl"), self.history)
        tqdm.write(str(record))
        if score > self.best:
            self.best = score
            save_weights(os.path.join(self.args.out_dir, "best.pt"), model, self.args, scores=scores)
        self.epoch, self.step, self.running = self.epoch + 1, 0, json.loads(self._fresh_running)
        save(os.path.join(self.args.out_dir, "last.pt"), self.state_dict())
        stale = Path(self.args.out_dir) / "interrupted.pt"   # last.pt is later than it now
        if distributed.is_main() and stale.is_file():
            stale.unlink()

    @contextmanager
    def saved_on_interrupt(self, stop):
        """From here a signal waits for the next step boundary; there the state is saved to interrupted.pt."""
        stop.defer()
        try:
            yield
        except interrupt.Interrupted as e:
            path = os.path.join(self.args.out_dir, "interrupted.pt")
            save(path, self.state_dict())
            print(f"\n{e}: saved {path} (epoch {self.epoch}, step {self.step}); continue with the same command plus "
                  f"--resume {path}")
            raise SystemExit(interrupt.EXIT_STATUS) from None
