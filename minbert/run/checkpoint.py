"""Training checkpoints: plain save and load, and a resume that checks its flags.

The script writes its checkpoint as one dict (as nanoGPT and nanochat do: the model, the optimizer, each method's
state, `"loop"` with its locals); this file holds what a loop cannot write in a line. Files are read with
`torch.load(weights_only=True)`, so a shared checkpoint cannot run code; weights are saved from the plain module
(no `_orig_mod.`/`module.` prefixes). Ctrl-C: minbert/core/interrupt.py; the files: docs/outputs.md.
"""

import json
import math
import os
import zipfile
from pathlib import Path

import torch

from minbert.run import distributed
from minbert.core.atomic import atomic_write
from minbert.core.device import rng_state, set_rng_state
from minbert.core.errors import UserError

# Flags that may differ between a run and its --resume: where things are, not what is trained.
WHERE = {"resume", "predict_only", "out_dir", "device", "use_gpu", "amp", "data_dir", "data_notes", "glue_dir",
         "eval_tasks", "dry_run", "overwrite", "keep_resume_state", "log_every", "log_seconds", "report_to",
         "handout_headers", "fast_paths", "threads", "select_epoch",
         *(f"{t}_{s}{o}" for t in ("sst", "para", "sts") for s in ("train", "dev", "test") for o in ("", "_out"))}


def add_args(parser, out_dir: str) -> None:
    g = parser.add_argument_group("run folder and resume")
    g.add_argument("--out_dir", default=out_dir, help="where the run writes: checkpoints, metrics.jsonl, model/, plots")
    g.add_argument("--resume", default=None, help="continue from OUT_DIR/last.pt or interrupted.pt of this script")
    g.add_argument("--predict_only", action="store_true",
                   help="no training: write the predictions/scores of the finished run in --resume (its --out_dir; "
                        "its model/, loaded as python -m minbert predict loads it), beside the run's own files, never "
                        "over them; your own sentences: python -m minbert predict")


def check_args(args, parser) -> None:
    if args.predict_only and not args.resume:
        parser.error(f"--predict_only needs --resume RUN_DIR, a finished run's --out_dir (e.g. {args.out_dir})")


class UnreadableCheckpoint(UserError):
    """A checkpoint file that cannot be loaded; `path` lets the run folder know it is no resume state."""

    def __init__(self, path, message: str):
        super().__init__(message)
        self.path = path


def save(path, state: dict) -> None:
    """Rank 0 alone writes (`state` is still built on every rank: gather_rng is collective); every rank returns once
    the file is in place, so none reads it back (--resume) before it exists."""
    if distributed.is_main():
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            atomic_write(path, lambda tmp: _save_file(state, tmp))
        except OSError as e:   # a full disk: name the checkpoint (a failed write names no file)
            e.filename = e.filename or str(path)
            raise
    distributed.barrier()


def _save_file(state: dict, tmp) -> None:
    """torch.save through a Python file, so a full disk is the OSError (ENOSPC) that the run folder turns into a
    message. torch.save(state, path) and torch's closing of the archive report it as an opaque RuntimeError
    ("unexpected pos 576 vs 534"); the OSError is that error's context."""
    try:
        with open(tmp, "wb") as f:
            torch.save(state, f)
    except RuntimeError as e:
        if isinstance(e.__context__, OSError):
            raise e.__context__ from None
        raise


def load(path, map_location="cpu") -> dict:
    """The checkpoint's dict; a best.pt that names its weights' folder ("weights_in") gets them back as "model"."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such checkpoint file")
    try:
        ck = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # a pickled object (refused: it could run code), a truncated or foreign file
        raise UnreadableCheckpoint(path, f"{path}: not a readable minbert checkpoint: {_why_unreadable(path, e)}. "
                                         "minbert writes last.pt, interrupted.pt and best.pt in a run folder") from None
    if isinstance(ck, dict) and "weights_in" in ck:
        folder = path.parent / ck["weights_in"]
        try:
            ck["model"] = weights_in(folder) | ck["model"]
        except Exception as e:   # the folder gone, or a file in it cut short
            raise UserError(f"{path} keeps its weights in {folder} (the run's exported model), which cannot be read "
                            f"({type(e).__name__}: {str(e)[:200]}); copy best.pt together with that folder") from None
    return ck


def weights_in(folder) -> dict:
    """A model's state_dict from the folder core/export.py wrote: the encoder's tensors (Hugging Face names there)
    under encoder.<our names>, the task modules' (heads, PALs) as they were saved."""
    from safetensors.torch import load_file
    from minbert.bert.config import BertConfig
    from minbert.bert.model import checkpoint_names
    from minbert.core.export import TASK_MODULES
    folder = Path(folder)
    encoder = load_file(str(folder / "model.safetensors"))
    state = {f"encoder.{ours}": encoder[theirs]
             for ours, theirs in checkpoint_names(BertConfig.from_json(folder / "config.json")).items()}
    if (folder / TASK_MODULES).is_file():
        state |= load_file(str(folder / TASK_MODULES))
    return state


def share_weights(best, folder) -> bool:
    """best.pt without its own copy of the tensors that `folder` (model/) holds, each checked equal, naming `folder`
    instead and keeping what it lacks (MML's elimination statistics); any other or different tensor leaves best.pt
    whole. True when best.pt now names the folder. Rank 0 only (the end of a run): no barrier."""
    best, folder = Path(best), Path(folder)
    ck = torch.load(best, map_location="cpu", weights_only=True)
    if "weights_in" in ck:
        return True
    try:
        theirs = weights_in(folder)
    except Exception:   # no such folder, or not one model's files: keep the copy
        return False
    ours = ck["model"]
    if not set(theirs) <= set(ours) or not all(torch.equal(ours[k], theirs[k]) for k in theirs):
        return False
    ck["model"] = {k: v for k, v in ours.items() if k not in theirs}
    ck["weights_in"] = os.path.relpath(folder, best.parent)
    atomic_write(best, lambda tmp: _save_file(ck, tmp))
    return True


def own_weights(best) -> None:
    """best.pt with its weights in it again (read from the folder it names), before that folder is rewritten."""
    best = Path(best)
    if best.is_file() and "weights_in" in torch.load(best, map_location="cpu", weights_only=True):
        ck = load(best)
        del ck["weights_in"]
        atomic_write(best, lambda tmp: _save_file(ck, tmp))


def _why_unreadable(path: Path, error: Exception) -> str:
    """What is wrong with a file torch.load refused, in words (torch's own text advises weights_only=False,
    which would let the file run code)."""
    if "Unsupported global" in str(error):
        return ("it holds pickled Python objects, which minbert never writes and which could run someone else's "
                "code when loaded, so it is refused")
    if zipfile.is_zipfile(path):
        return "a damaged torch file"
    with open(path, "rb") as f:   # a zip's first bytes, without the zip's end
        cut = f.read(2) == b"PK"
    return ("the file is cut short or damaged (a copy or a save that did not finish?)" if cut else
            "this is not a file that torch.save wrote")


def save_last(out_dir, state: dict) -> None:
    """OUT_DIR/last.pt at an epoch's end; interrupted.pt, older than it now, goes (a resume must not pick it up)."""
    save(Path(out_dir) / "last.pt", state)
    stale = Path(out_dir) / "interrupted.pt"
    if distributed.is_main() and stale.is_file():
        stale.unlink()


def save_weights(path, model, args, **info) -> None:
    """best.pt: the model's weights, the flags (JSON) and `info` (e.g. scores); no resume state."""
    save(path, {"model": model.state_dict(), "args": json.dumps(vars(args)), **info})


def saved_args(ck: dict) -> dict:
    return json.loads(ck.get("args") or "{}")


def load_for_resume(args, script: str) -> dict:
    """Load --resume for `script`, refusing a file that is no checkpoint of this script, a weights-only best.pt, and
    one trained with other flags than `args` (those in WHERE may change); flags left at None take the checkpoint's."""
    ck = load(args.resume)
    if "model" not in ck:
        raise UnreadableCheckpoint(args.resume, f"--resume {args.resume}: not a checkpoint written by {script} (it "
                                   f"has no 'model' key); a model's weights file goes to --model as its folder")
    saved, now = saved_args(ck), json.loads(json.dumps(vars(args)))   # tuples become lists, as in the file
    foreign = sorted(set(saved) - set(now))
    if foreign:
        raise UnreadableCheckpoint(args.resume, f"--resume {args.resume}: written by another script (or another "
                                   f"version of minbert): {script} has no flag "
                                   + ", ".join(f"--{k}" for k in foreign[:3])
                                   + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
                                   + ". Resume it with the script that wrote it")
    if "optimizer" not in ck:
        last = Path(args.resume).parent / "last.pt"
        raise UserError(f"--resume {args.resume} holds only a model's weights (best.pt keeps no optimizer, schedule or "
                        f"data position), so training cannot continue from it. Continue an unfinished run with "
                        f"--resume {last} "
                        f"(or interrupted.pt; a finished run keeps last.pt only with --keep_resume_state); predict "
                        f"with the finished run's model: --predict_only --resume {Path(args.resume).parent}")
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
    if "loop" not in ck and "running" in ck:   # written by an earlier minbert
        ck["loop"] = earlier_loop(ck)
    return ck


def earlier_loop(ck: dict) -> dict:
    """The "loop" entry of a checkpoint an earlier minbert wrote: the loop's keys at the top level (`running`: the
    loss sums, `extra`: train_mml's trace and events) and the log's times and sums at the last record under "log"."""
    log = ck.get("log") or {"elapsed_s": 0.0, "epoch_s": 0.0, "epoch_examples": 0, "last": {}}
    running = ck["running"]
    if set(running) == {"task", "mv", "n"}:   # train_mml before both scripts kept {name: [sum, count]}
        running = {name: [value, running["n"]] for name, value in running.items() if name != "n"}
    last = {name: log["last"].get(name, (0.0, 0)) for name in running}
    return {"epoch": ck["epoch"], "step": ck["step"], "best": ck["best"], "history": ck["history"],
            "elapsed_s": log["elapsed_s"], "sums": running, "seen": [log["epoch_s"], log["epoch_examples"]],
            "window": {name: [s - last[name][0], n - last[name][1]] for name, (s, n) in running.items()},
            **ck.get("extra", {})}


def rng_states() -> dict:
    """{"rng": python, numpy and torch RNG states} (+ "rng_ranks", every rank's, under torchrun: collective).
    Numpy's keys are stored as {"ndarray": a tensor, "dtype"}, which weights_only loading accepts (converted after
    the gather: a uint32 tensor does not pickle between ranks)."""
    def storable(state):
        kind, keys, *rest = state["numpy"]
        return state | {"numpy": (kind, {"ndarray": torch.from_numpy(keys.copy()), "dtype": str(keys.dtype)}, *rest)}
    snapshot = distributed.gather_rng({"rng": rng_state()})
    return {k: storable(v) if k == "rng" else [storable(s) for s in v] for k, v in snapshot.items()}


def set_rng_states(ck: dict) -> None:
    """Every RNG back to the checkpoint's state (this rank's under torchrun)."""
    state = dict(distributed.own_rng(ck))
    kind, keys, *rest = state["numpy"]
    set_rng_state(state | {"numpy": (kind, keys["ndarray"].numpy().astype(keys["dtype"]), *rest)})


def state(objects: dict, loop: dict, args) -> dict:
    """last.pt and interrupted.pt: {name: obj.state_dict()} of a script's objects (None for a method that is off, a
    list for one per task), the RNGs, the loop's locals and the flags: all an exact resume needs, at a step boundary."""
    def one(obj):
        return None if obj is None else [o.state_dict() for o in obj] if isinstance(obj, list) else obj.state_dict()
    return {**{name: one(obj) for name, obj in objects.items()}, **rng_states(), "loop": loop,
            "args": json.dumps(vars(args))}


def restore(ck: dict | None, objects: dict, sums: dict | None = None, **more) -> dict:
    """Back to the step boundary `ck` was saved at: every object's state (as `state` names them) and every RNG;
    returns the loop's locals, and says where the run continues. No `ck`: the fresh run's locals (`sums`: the
    losses' {name: [sum, count]} before the first; `more`: a script's own, e.g. train_mml's trace and events)."""
    if ck is None:
        return {"epoch": 1, "step": 0, "best": -math.inf, "history": [], "elapsed_s": 0.0,   # where, its records
                "sums": sums, "seen": [0.0, 0], "window": dict(sums), **more}   # losses, [s, examples]; the log's
    for name, obj in objects.items():
        if obj is not None and ck.get(name) is not None:   # None: off then (an earlier minbert's scaler off fp16)
            for o, s in zip(obj, ck[name]) if isinstance(obj, list) else [(obj, ck[name])]:
                o.load_state_dict(s)
    set_rng_states(ck)
    print(resume_note(ck["loop"]))
    return ck["loop"]


def resume_note(loop: dict) -> str:
    """One plain line: where the run continues, and the best dev score so far if an epoch has finished."""
    where = f"resuming at epoch {loop['epoch']}, step {loop['step']}"
    if not loop["history"] or not math.isfinite(loop["best"]):
        return f"{where}; no epoch finished yet"
    return f"{where}; {len(loop['history'])} epoch(s) done, best dev score so far {loop['best']:.4f}"
