"""A run folder (--out_dir) that holds everything a run writes, never clobbers another run, and stays lean.

Anchors: Hugging Face Trainer (`output_dir`, `overwrite_output_dir`), PyTorch Lightning's checkpoint retention.
`RunDir(args, script)` wraps both scripts' main: on entry it refuses a used --out_dir or an existing --*_out (unless
--overwrite), locks the folder (flock; not on Windows) and writes run.json; on exit it leaves no litter after an
early failure, drops last.pt from a finished run unless --keep_resume_state, turns a full or read-only disk into a
message, and prints a summary. What the folder holds and what is refused: docs/outputs.md. Under torchrun every
rank makes the same refusal; only rank 0 writes or deletes files.
"""

import contextlib
import datetime
import errno
import json
import os
import re
import shlex
import shutil
import sys
import zipfile
from pathlib import Path

try:
    import fcntl
except ImportError:   # Windows: no flock, so no lock (run_dir's docstring, 5)
    fcntl = None

from minbert.core.errors import UserError

MARKER = "run.json"
RESUME_STATE = ("last.pt", "interrupted.pt")
# Every name a minbert run writes into its folder. A folder holding any of them (other than the marker and
# stage.json, which a run writes before it has trained anything) is another run's.
ARTEFACTS = ("best.pt", "last.pt", "interrupted.pt", "metrics.jsonl", "steps.jsonl", "tensorboard", "curves.png",
             "outputs.pt", "model", "predictions", "eliminations.jsonl", "heads.png", "cross_dataset.json",
             "stage.json", MARKER)
PREDICT_ONLY = re.compile(r"predictions-\d+|cross_dataset-\d+\.json")   # what --predict_only adds (fresh_path)
SETUP_ONLY = {MARKER, "stage.json"}   # what a run that failed before training may have written
# errors that mean "the disk refused a write" (full, over quota, over the file size limit, read-only), and those
# that do when the file is in the run folder (no permission)
FULL_OR_READ_ONLY = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS}
NO_PERMISSION = {errno.EACCES, errno.EPERM}


def add_run_args(parser, out_dir: str, seed: int) -> None:
    """The flags both training scripts share, each group from the module that owns it."""
    from minbert.run import checkpoint, fast_paths   # here: importing run_dir alone stays light
    from minbert.core import device, progress
    device.add_args(parser, seed=seed)
    checkpoint.add_args(parser, out_dir=out_dir)
    add_args(parser)
    progress.add_args(parser)
    fast_paths.add_args(parser)


def main(args, script: str, experiment):
    """Both scripts' main(): the run folder (RunDir), then `experiment(args, stop)` under a StopSignal
    (minbert/core/interrupt.py). Under torchrun every rank must stop at the same step, so no phase is abortable.
    A signal during setup (before stop.saving) ends the run at once, with nothing to save."""
    from minbert.core.interrupt import EXIT_STATUS, Interrupted, StopSignal
    from minbert.run import distributed
    with RunDir(args, script), StopSignal(abortable=not distributed.launched()) as stop:
        try:
            return experiment(args, stop)
        except Interrupted as e:
            print(f"\n{e}: stopped before training started; nothing to save")
            raise SystemExit(EXIT_STATUS) from None


def start(args, script: str, about: str):
    """What both scripts' experiment() does first: --resume loaded and checked (`ck`, None for a fresh run or
    --predict_only), the seed, the device (joining torchrun's process group), --amp, the thread count (a resume keeps
    the checkpoint's) and the fast paths, each said in a line. Returns (ck, device, fast paths)."""
    import torch
    from minbert.core.device import resolve_amp, seed_everything, set_threads
    from minbert.run import checkpoint, distributed, fast_paths
    ck = checkpoint.load_for_resume(args, script) if args.resume and not args.predict_only else None
    seed_everything(args.seed)
    device = distributed.setup(args.device)   # + process group under torchrun
    args.amp, amp_reason = resolve_amp(args.amp, device)
    print(f"device {device}, amp {args.amp} ({amp_reason}), model {args.model}, {about}")
    set_threads(args.threads, device, resumed=checkpoint.saved_args(ck).get("threads", 0) if ck else 0)   # one line
    args.threads = torch.get_num_threads()   # what the checkpoints record: a resume keeps it, so it is exact
    fast = fast_paths.from_args(args, device)   # faster given code, equal to the readable path (--fast_paths off)
    print(f"fast paths: {fast}")
    return ck, device, fast


def add_args(parser) -> None:
    g = parser.add_argument_group("run folder (minbert/run/run_dir.py)")
    g.add_argument("--overwrite", action="store_true",
                   help="replace the run already in --out_dir and existing prediction files (default: refuse)")
    g.add_argument("--keep_resume_state", action="store_true",
                   help="keep last.pt (weights + optimizer moments, ~3x the model) after the run finishes, to "
                        "train on later with --resume; by default a finished run keeps model/, best.pt, outputs, "
                        "metrics")


def _is_main() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def human(n: float) -> str:
    """Decimal units (1 MB = 10^6 bytes), as disk vendors and the README's figures count."""
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000


def _artefacts(folder: Path) -> list[str]:
    if not folder.is_dir():
        return []
    return ([n for n in ARTEFACTS if (folder / n).exists()]
            + sorted(p.name for p in folder.iterdir() if PREDICT_ONLY.fullmatch(p.name)))


def _output_flags(args) -> dict[str, Path]:
    """{flag: path} of the prediction files this run will write (every --X_out whose input X is not 'none')."""
    return {k: Path(v) for k, v in sorted(vars(args).items())
            if k.endswith("_out") and isinstance(v, str) and getattr(args, k[:-4], None) != "none"}


def fresh_path(path) -> Path:
    """`path` if nothing is there yet, else the first free `name-2`, `name-3`, ... beside it (before any suffix):
    where a command that never replaces a file writes instead."""
    path = Path(path)
    candidate, n = path, 2
    while candidate.exists():
        candidate, n = path.with_name(f"{path.stem}-{n}{path.suffix}"), n + 1
    return candidate


def refuse_to_replace(paths) -> None:
    """A UserError naming the first of `paths` that exists: a command that writes them would replace it."""
    there = next((Path(p) for p in paths if Path(p).exists()), None)
    if there is not None:
        raise UserError(f"{there} already exists; nothing was changed. Choose another --out_dir, or add "
                        "--overwrite to replace it")


def read_marker(root) -> dict:
    """The run folder's run.json ({} when there is none, or it is not a JSON object)."""
    try:
        marker = json.loads((Path(root) / MARKER).read_text())
    except (OSError, ValueError):
        return {}
    return marker if isinstance(marker, dict) else {}


def unfinished(root) -> str | None:
    """Why the run in `root` has no model yet, by its run.json: still training, interrupted (with the command that
    resumes it) or failed; None when run.json says nothing of the kind."""
    root, marker = Path(root), read_marker(root)
    status = marker.get("status")
    if status not in ("running", "stopped, resumable", "failed"):
        return None
    script = marker.get("script", "its script")
    state = next((root / n for n in ("interrupted.pt", "last.pt") if (root / n).is_file()), None)   # the newer first
    command = (marker.get("sessions") or [{}])[-1].get("command") or [script]
    resume = None
    if state is not None and isinstance(command, list) and all(isinstance(c, str) for c in command):
        kept = [c for i, c in enumerate(command) if c != "--resume" and (i == 0 or command[i - 1] != "--resume")
                and not c.startswith("--resume=")]
        resume = f"python {shlex.join(kept)} --resume {state}"
    if status == "running":
        then = f"; if it was stopped, `{resume}` continues it" if resume else ""
        return (f"{script} is still training it (run.json: running, started {marker.get('started', '?')}); "
                f"its model/ is written when it ends{then}")
    if status == "stopped, resumable" and resume:
        return f"{script} was interrupted (run.json: stopped, resumable); `{resume}` finishes it and writes model/"
    return f"{script} stopped before it finished (run.json: {status}); nothing to resume, train it again"


class RunDir:
    """Context manager around a script's work: points 1-5 of the module docstring, on entry and on exit."""

    def __init__(self, args, script: str):
        self.args, self.script = args, script
        self.root = Path(args.out_dir)
        self.created = not self.root.exists()
        self._lock = None   # the folder's lock, held from claim() to the exit (lock())

    # ------------------------------------------------------------------ entry: refuse, or claim
    def __enter__(self):
        args, root = self.args, self.root
        if root.exists() and not root.is_dir():
            raise UserError(f"--out_dir {root}: is a file, expected a folder")
        blocker = next((p for p in root.parents if p.is_file()), None)
        if blocker is not None:
            raise UserError(f"--out_dir {root}: cannot write there ({blocker} is a file); choose a writable folder")
        # an empty folder (predictions/ is made at the start) holds nothing: a run killed during setup left it
        used = [n for n in _artefacts(root) if n not in SETUP_ONLY
                and not ((root / n).is_dir() and not any((root / n).iterdir()))]
        resume = args.resume   # the same run: --resume names this folder's checkpoint (or the folder)
        same = bool(resume) and root.resolve() in (Path(resume).resolve(), Path(resume).resolve().parent)
        marker = read_marker(root)
        if used and not same and not args.overwrite:
            what = f"{marker.get('script', 'a run')} started {marker.get('started', '?')}" if marker else "a run"
            state = [n for n in RESUME_STATE if (root / n).is_file()]
            hint = f", --resume {root / state[0]} to continue it" if state else ""
            raise UserError(f"--out_dir {root} already holds {what} ({', '.join(used)}); nothing was changed. "
                            f"Choose another --out_dir{hint}, or add --overwrite to replace it")
        predict_only = args.predict_only
        if predict_only and not args.overwrite:
            self.fresh_predictions()
        ours = set(marker.get("outputs", [])) if same and not predict_only else set()
        clash = {f: p for f, p in _output_flags(args).items()
                 if p.exists() and (predict_only or not self._inside(p)) and str(p.resolve()) not in ours}
        if clash and not args.overwrite:
            flag, path = next(iter(clash.items()))
            if predict_only:   # a file the user named: never replaced without asking
                raise UserError(f"{path} already exists; --predict_only never replaces a prediction file, nothing "
                                f"was changed. Give --{flag} another path, or add --overwrite to replace it")
            raise UserError(f"{path} already exists (from another run); nothing was changed. Leave the --*_out "
                            f"flags out (the files then go to {root / 'predictions'}), choose other paths, "
                            f"or add --overwrite")
        self.keep_marker = predict_only and same   # the run's run.json stays as it was (its status, its end)
        if _is_main() and not self.keep_marker:
            try:
                self.claim(used and not same, marker if same else {})
            except OSError as e:   # a read-only folder, /proc, a full disk
                if self.created and self.root.is_dir() and not any(self.root.iterdir()):
                    self.root.rmdir()
                raise UserError(f"--out_dir {root}: cannot write there ({e.strerror}); choose a writable folder") \
                    from None
        return self

    def claim(self, replace: bool, marker: dict) -> None:
        """Create the folder (with --overwrite, first remove the old run's files, so none of them is mistaken
        for ours) and write run.json; `marker`: this run's own earlier marker when it resumes."""
        root = self.root
        root.mkdir(parents=True, exist_ok=True)
        self.lock()
        if replace:
            for name in _artefacts(root):
                shutil.rmtree(root / name) if (root / name).is_dir() else (root / name).unlink()
        from minbert.core.device import machine
        now = datetime.datetime.now().isoformat(timespec="seconds")
        sessions = marker.get("sessions", []) + [{"started": now, "command": sys.argv, "machine": machine()}]
        outputs = set(marker.get("outputs", [])) | {str(p.resolve()) for p in _output_flags(self.args).values()}
        self.write_marker({"script": self.script, "started": sessions[0]["started"], "status": "running",
                           "sessions": sessions, "outputs": sorted(outputs)})

    def lock(self) -> None:
        """Hold the folder for this process (flock on the folder itself, released when the process ends); another
        process holding it means another run is working in it: refused, nothing changed."""
        if fcntl is None:
            return
        self._lock = os.open(self.root, os.O_RDONLY)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock)
            self._lock = None
            marker = read_marker(self.root)
            raise UserError(f"--out_dir {self.root}: another process is working in it now "
                            f"({marker.get('script', 'a run')}, run.json: {marker.get('status', '?')}); nothing was "
                            f"changed. Wait for it to end, or choose another --out_dir") from None

    def fresh_predictions(self) -> None:
        """--predict_only: where predictions/ already holds any of this command's files, every default path moves to
        a new predictions-2/ (-3, ...); a path given explicitly stays, and is refused if it exists."""
        from minbert.tasks.data import PREDICTION_FILES, STAND_IN_PARA_TEST
        default = self.root / "predictions"
        moved = {f: p for f, p in _output_flags(self.args).items() if p.parent == default
                 and p.name in (PREDICTION_FILES[f], STAND_IN_PARA_TEST if f == "para_test_out" else None)}
        if not any(p.exists() for p in moved.values()):
            return
        folder = fresh_path(default)
        for flag, path in moved.items():
            setattr(self.args, flag, str(folder / path.name))
        print(f"--predict_only: {default} holds the run's predictions, which stay as they are; these go to {folder}")

    def _inside(self, path: Path) -> bool:
        return self.root.resolve() in path.resolve().parents

    def write_marker(self, record: dict) -> None:
        from minbert.core.export import write_json   # here: importing run_dir alone stays light (no torch)
        write_json(self.root / MARKER, record)

    # ------------------------------------------------------------------ exit: finish, or clean up
    def __exit__(self, kind, error, tb):
        try:
            return self.close(kind, error)
        finally:
            if self._lock is not None:   # the folder is free again (the process ending would free it too)
                os.close(self._lock)

    def close(self, kind, error) -> bool:
        if _is_main() and kind is None:
            self.finish()
        if not _is_main() or kind is None or not self.root.is_dir():
            return False
        predictions = self.root / "predictions"   # made at the start: gone again when nothing was written in it
        if predictions.is_dir() and not any(predictions.iterdir()):
            predictions.rmdir()
        # failed before saving anything (no file but run.json and stage.json): leave no trace
        if not any(p.is_file() and p.name not in SETUP_ONLY for p in self.root.rglob("*")):
            if self.created:
                shutil.rmtree(self.root)
                print(f"{self.root}: removed (the run saved nothing)", file=sys.stderr)
            else:   # the user's folder stays; only what this run put there goes
                for name in SETUP_ONLY:
                    (self.root / name).unlink(missing_ok=True)
            return False
        resume = self.resume_state(unreadable=getattr(error, "path", None))
        marker = {} if self.keep_marker else read_marker(self.root)
        if marker:
            with contextlib.suppress(OSError):   # on a full disk even run.json may not fit: it still says "running"
                self.write_marker(marker | {"status": "stopped, resumable" if resume else "failed"})
        if isinstance(error, OSError) and self.refused_write(error):
            then = (f"then continue with the same command plus --resume {resume}" if resume else
                    "then start again (nothing was saved to resume from)")
            raise UserError(f"--out_dir {self.root}: could not write {error.filename or 'a file'} "
                            f"({error.strerror}); the run stopped. Make room or choose a writable folder, "
                            f"{then}") from None
        return False

    def refused_write(self, error: OSError) -> bool:
        """Is `error` the disk refusing a write (full, read-only), or no permission in this run's folder?"""
        if error.errno in FULL_OR_READ_ONLY:
            return True
        return error.errno in NO_PERMISSION and (not error.filename or self._inside(Path(error.filename)))

    def resume_state(self, unreadable=None) -> Path | None:
        """The folder's last.pt or interrupted.pt that a resume could load: present, a whole zip archive (what
        torch.save writes; a truncated copy is not), and not `unreadable` (a checkpoint that just failed to load)."""
        for name in RESUME_STATE:
            path = self.root / name
            if (path.is_file() and zipfile.is_zipfile(path)
                    and not (unreadable and Path(unreadable).resolve() == path.resolve())):
                return path
        return None

    def finish(self) -> None:
        args = self.args
        if not args.predict_only:
            for name in ["interrupted.pt"] + ([] if args.keep_resume_state else ["last.pt"]):
                (self.root / name).unlink(missing_ok=True)
        if not self.keep_marker:
            ended = datetime.datetime.now().isoformat(timespec="seconds")
            self.write_marker(read_marker(self.root) | {"status": "finished", "ended": ended})
        print(summary(self.root, [p for p in _output_flags(args).values() if p.exists() and not self._inside(p)]))


def summary(root: Path, outside=()) -> str:
    """'run folder X (size): name size, ...' plus any prediction files written elsewhere."""
    entries = sorted(root.iterdir(), key=lambda p: (p.is_file(), p.name))
    sizes = {p: _size(p) for p in entries}
    parts = [f"{p.name}{'/' if p.is_dir() else ''} {human(s)}" for p, s in sizes.items()]
    lines = [f"\nrun folder {root} ({human(sum(sizes.values()))}): " + ", ".join(parts)]
    if outside:
        lines.append("also written: " + ", ".join(str(p) for p in outside))
    if not (root / "last.pt").exists() and (root / "model").is_dir():
        lines.append("resume state dropped (the run finished; --keep_resume_state keeps last.pt). "
                     f"Next: --model {root / 'model'} or --init_from {root} starts a new stage from this model")
    return "\n".join(lines)
