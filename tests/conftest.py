"""Shared test plumbing: number comparison, random batches, tiny models, self-made data files, signals.

Only plumbing lives here, never a reference implementation: the classroom edition ships this file
to students (and the grader copies it beside the graded tests), so nothing here may compute what an
assignment computes. Test files import the plain helpers by name (`from conftest import check`):
tests/ has no __init__.py, so pytest puts it on sys.path and this module is importable as `conftest`.

  check(actual, expected, where)      float64 max-abs-diff comparison whose message names the function to fix
  make_batch(task, seed)              a random (B, T) = (4, 12) batch with padding, two segments and labels
  tiny_multitask(seed, **kw)          MultitaskBert on a random BertConfig.tiny() encoder (2 layers, 32 wide)
  save_tiny_model(folder)             a random tiny BERT saved as a model folder with MiniLM's vocabulary
  write_task_files(folder)            CS224N-format SST / Quora / STS files (train_multitask.py's data)
  write_glue(folder)                  GLUE-format RTE / QNLI / MNLI / MRPC / STS-B files (train_mml.py's data)
  signal_on_call(monkeypatch, ...)    a real SIGINT/SIGTERM delivered inside the n-th call of a function
  plots                               a fixture: this test draws the runs' curves.png / heads.png (others skip them)
  flags_parser(*modules, **plain)     minbert's ArgumentParser with each module's add_args (+ plain --name flags)
  refusal(module, parser, argv, capsys)  what module.check_args prints when it refuses argv, or None
  real_cs224n_dir / real_glue_dir     where the real data files are: $MINBERT_DATA, else the shipped data/
  needs_cs224n / needs_glue           skip markers naming the files, only when neither place has them
  glue_files(task)                    the full GLUE files if present, else tests/fixtures/glue's slice of them

The data files and the tiny model are pinned: tests compare runs on them byte for byte, so change
them only together with those tests.
"""

import ctypes
import os
import re
import shutil
import signal
import warnings
from pathlib import Path

# What the caller's shell sets must not change what a test checks. Set before torch, transformers or huggingface_hub
# read them (huggingface_hub copies HF_HUB_OFFLINE into a constant at import); the child processes inherit the same.
# - Threads: one per test process (OMP_NUM_THREADS=1, whatever the shell says), so `pytest -n auto` on a 16-core
#   machine runs near one thread per worker instead of 16 each (a load of 111 on 16 cores was seen), and so the
#   numbers a test compares do not depend on the machine: a CPU's sums depend on how many threads split them.
#   torch.compile's own compile workers likewise (TORCHINDUCTOR_COMPILE_THREADS).
# - HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE: the tests that need offline set it themselves (monkeypatch.setenv); the
#   dry-run table of a model in no cache said "the run would stop" instead of "downloads it first" when set.
# - torchrun's variables (RANK, WORLD_SIZE, ...): a test is one process unless it starts torchrun itself.
# The GPU is left visible: every test that compares numbers or builds a model pins --device cpu and its precision
# (bench/results/gpu_tests.md lists them), and the tests marked `gpu` (pytest.ini) need one and skip without it.
PINNED_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TORCHINDUCTOR_COMPILE_THREADS": "1"}
CLEARED_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
               "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID")
os.environ.update(PINNED_ENV)
for _name in CLEARED_ENV:
    os.environ.pop(_name, None)

import pytest  # noqa: E402
import torch  # noqa: E402

from minbert.core import report  # noqa: E402

torch.set_num_threads(1)


def pytest_runtest_setup(item):
    """A test marked `gpu` skips, saying why, only where no CUDA GPU is visible. Asked here, when such a test is
    about to run, not at import: CUDA is not even initialised in a session without one."""
    if item.get_closest_marker("gpu") and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (marked gpu); none is visible here")


@pytest.fixture(autouse=True)
def _one_thread():
    """Each test starts with one torch thread, whatever the test before it did (a run with --threads 2 sets torch's
    threads for the whole process; a test's environment changes go through monkeypatch, which undoes them)."""
    torch.set_num_threads(1)


# Root writes to read-only files and folders (CAP_DAC_OVERRIDE). A child process started with
# preexec_fn=meet_file_modes drops that capability from its bounding set before exec (what
# `setpriv --inh-caps=-dac_override --bounding-set=-dac_override` does), so it meets file modes as any user does.
PR_CAPBSET_DROP, CAP_DAC_OVERRIDE = 24, 1   # <linux/prctl.h>, <linux/capability.h>


def meet_file_modes():
    if os.geteuid() == 0 and ctypes.CDLL(None, use_errno=True).prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, 0, 0, 0):
        os._exit(99)

# References a user cannot follow (tests/test_no_internal_references.py): a number of this project's tracker, a
# notes file outside the repository, a folder of the machine the code was written on. The scan skips this line.
UNFOLLOWABLE = re.compile(r"\bissues? #?\d+|REFERENCE-NOTES|\.\./shared\b|/work/|\bNOTES-[\w-]+\.md", re.IGNORECASE)

B, T = 4, 12   # make_batch's batch size and sequence length


# ---------------------------------------------------------------------------- drawing the runs' plots
PYPLOT = report.pyplot   # the real one
RUN_PLOTS = ("curves.png", "heads.png")   # what every train_multitask.py / train_mml.py run draws at its end


def _pyplot_except_run_plots(path):
    return None if Path(path).name in RUN_PLOTS else PYPLOT(path)


@pytest.fixture(scope="session", autouse=True)
def _draw_run_plots_only_where_asked():
    """Each training run's curves.png and heads.png are drawn only in the tests that ask (the `plots` fixture):
    drawing them was about half the time of a tiny in-process run (matplotlib's text layout, seconds a figure on a
    busy 2-core CPU; five tests of test_flags_matter.py took 52 s with them, 29 s without). The scripts still build
    each figure's data and call minbert.core.report, whose `pyplot` answers None for these two, as without
    matplotlib but silently; every other figure (studies, tables) is drawn, and so are runs in child processes."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(report, "pyplot", _pyplot_except_run_plots)
        yield


@pytest.fixture
def plots(monkeypatch):
    """Ask for the runs' real plots in this test: minbert.core.report draws curves.png and heads.png."""
    monkeypatch.setattr(report, "pyplot", PYPLOT)


# ---------------------------------------------------------------------------- comparing numbers
def check(actual, expected, where, atol=1e-6):
    """Fail with the function to fix, both values and the max abs diff."""
    actual = torch.as_tensor(actual, dtype=torch.float64)
    expected = torch.as_tensor(expected, dtype=torch.float64)
    assert actual.shape == expected.shape, \
        f"`{where}`: expected shape {tuple(expected.shape)}, got {tuple(actual.shape)}"
    diff = (actual - expected).abs().max().item() if actual.numel() else 0.0
    assert diff <= atol, \
        f"`{where}`: expected {expected.tolist()}, got {actual.tolist()} (max abs diff {diff:.3g} > atol {atol})"


# ---------------------------------------------------------------------------- inputs and tiny models
def make_batch(task, seed=0):
    """(B, T) = (4, 12) random ids; example 0 is padded after 8 tokens; second segment from 6."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 1000, (B, T), generator=g)
    mask = torch.ones(B, T, dtype=torch.long)
    ids[0, 8:], mask[0, 8:] = 0, 0
    types = torch.zeros(B, T, dtype=torch.long)
    types[:, 6:] = 1
    labels = {"sst": torch.randint(0, 5, (B,), generator=g), "para": torch.randint(0, 2, (B,), generator=g).float(),
              "sts": torch.rand(B, generator=g) * 5}[task]
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types, "labels": labels}


def tiny_multitask(seed=0, config=None, **kw):
    """MultitaskBert(**kw) on a random BertConfig.tiny(**config) encoder, seeded (train mode)."""
    from minbert.bert.config import BertConfig
    from minbert.bert.model import BertModel
    from minbert.tasks.multitask import MultitaskBert
    torch.manual_seed(seed)
    return MultitaskBert(BertModel(BertConfig.tiny(**(config or {}))), **kw)


def save_tiny_model(folder, seed=0):
    """A random BertConfig.tiny() BERT saved to `folder` with MiniLM's vocab.txt: a folder `--model` takes."""
    from minbert.core import hub
    from minbert.bert.config import BertConfig
    from minbert.bert.model import BertModel
    torch.manual_seed(seed)
    with warnings.catch_warnings():   # "gets no vocab.txt": it is copied in on the next line
        warnings.filterwarnings("ignore", "BertModel.save_pretrained", UserWarning)
        BertModel(BertConfig.tiny()).save_pretrained(folder)
    shutil.copy(hub.resolve("minilm-l6") / "vocab.txt", folder / "vocab.txt")
    return folder


# ---------------------------------------------------------------------------- CS224N-format data (train_multitask.py)
WORDS = "good bad movie plot actor great awful film story fun dull nice boring smart".split()


def sentence(i):
    return " ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 5, 7)[: 2 + i % 3])


def write_task_files(d, n=24):
    """CS224N-format files (tab-separated, unnamed index column) with n labeled rows each."""
    pair = "\tid\tsentence1\tsentence2"
    rows = {
        "ids-sst-train.csv": ("\tid\tsentence\tsentiment", lambda i: f"{i}\ts{i}\t{sentence(i)}\t{i % 5}"),
        "ids-sst-dev.csv": ("\tid\tsentence\tsentiment", lambda i: f"{i}\tsd{i}\t{sentence(i + 1)}\t{i % 5}"),
        "ids-sst-test-student.csv": ("0\t\tid\tsentence", lambda i: f"{i}\t0.0\tst{i}\t{sentence(i + 2)}"),
        "quora-train.csv": (pair + "\tis_duplicate",
                            lambda i: f"{i}\tq{i}\t{sentence(i)}\t{sentence(i + i % 2)}\t{float(1 - i % 2)}"),
        "quora-dev.csv": (pair + "\tis_duplicate",
                          lambda i: f"{i}\tqd{i}\t{sentence(i)}\t{sentence(i + i % 2)}\t{float(1 - i % 2)}"),
        "quora-test-student.csv": (pair, lambda i: f"{i}\tqt{i}\t{sentence(i)}\t{sentence(i + 3)}"),
        "sts-train.csv": (pair + "\tsimilarity",
                          lambda i: f"{i}\tt{i}\t{sentence(i)}\t{sentence(i + i % 3)}\t{(i % 6) * 1.0}"),
        "sts-dev.csv": (pair + "\tsimilarity",
                        lambda i: f"{i}\ttd{i}\t{sentence(i)}\t{sentence(i + i % 3)}\t{(i % 6) * 1.0}"),
        "sts-test-student.csv": (pair, lambda i: f"{i}\ttt{i}\t{sentence(i)}\t{sentence(i + 1)}"),
    }
    for name, (header, row) in rows.items():
        (d / name).write_text("\n".join([header] + [row(i) for i in range(n)]) + "\n")


# ---------------------------------------------------------------------------- GLUE-format data (train_mml.py)
GLUE_WORDS = "the cat dog sat ran on mat park big small red blue house car tree went saw".split()


def glue_sentence(i, shift=0):
    return " ".join(GLUE_WORDS[(i * k + shift) % len(GLUE_WORDS)] for k in (1, 3, 5, 7)[: 2 + i % 3])


def write_tsv(path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(["\t".join(header)] + ["\t".join(map(str, r)) for r in rows]) + "\n")


def write_glue(root, n=24):
    """RTE, QNLI, MNLI (dev only), MRPC and STS-B files in GLUE's layout, n rows per split."""
    nli, s_ = ("entailment", "not_entailment"), glue_sentence
    for split, s in (("train", 0), ("dev", 1)):
        write_tsv(root / "RTE" / f"{split}.tsv", ["index", "sentence1", "sentence2", "label"],
                  [(i, s_(i, s), s_(i, s + i % 2), nli[i % 2]) for i in range(n)])
        write_tsv(root / "QNLI" / f"{split}.tsv", ["index", "question", "sentence", "label"],
                  [(i, s_(i, s + 2), s_(i, s + 2 + i % 2), nli[i % 2]) for i in range(n)])
        write_tsv(root / "MRPC" / f"{split}.tsv", ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
                  [(i % 2, i, i + 1, s_(i, s), s_(i, s + 1 - i % 2)) for i in range(n)])
        write_tsv(root / "STS-B" / f"{split}.tsv", ["index", "sentence1", "sentence2", "score"],
                  [(i, s_(i, s), s_(i, s + i % 3), (0.5, 4.5, 1.0, 5.0, 3.0)[i % 5]) for i in range(n)])
    mnli = ("entailment", "neutral", "contradiction")   # MNLI: dev only, so its train split is skipped
    write_tsv(root / "MNLI" / "dev_matched.tsv", ["index", "sentence1", "sentence2", "gold_label"],
              [(i, s_(i, 4), s_(i, 4 + i % 3), mnli[i % 3]) for i in range(n)])


# ---------------------------------------------------------------------------- signals
def signal_on_call(monkeypatch, owner, name, n, sig=signal.SIGINT, when=None):
    """Patch owner.name so that its n-th call (counting only calls where when() is true) sends `sig` to
    this process first, then runs the real function: the signal lands inside that phase."""
    real, calls = getattr(owner, name), {"n": 0}

    def patched(*a, **k):
        if when is None or when():
            calls["n"] += 1
            if calls["n"] == n:
                os.kill(os.getpid(), sig)
        return real(*a, **k)

    monkeypatch.setattr(owner, name, patched)


# ---------------------------------------------------------------------------- the real data files
# Read in place, never copied: from $MINBERT_DATA/cs224n and $MINBERT_DATA/glue when that variable names a folder
# with the full files (docs/testing.md), else from the repository's own data/ (what a fresh clone ships). A test
# skips only when neither place holds its files.
REPO = Path(__file__).resolve().parents[1]
FULL_DATA = [Path(os.environ["MINBERT_DATA"])] if os.environ.get("MINBERT_DATA") else []
CS224N_PLACES = tuple(d / "cs224n" for d in FULL_DATA) + (REPO / "data",)
GLUE_PLACES = tuple(d / "glue" for d in FULL_DATA) + (REPO / "data" / "glue_data",)


def flags_parser(*modules, **plain):
    """minbert's ArgumentParser holding each module's flags (module.add_args), plus `--name` flags with the given
    defaults for the script's own flags a check_args reads (e.g. surgery="none")."""
    from minbert.core.flags import ArgumentParser
    p = ArgumentParser()
    for module in modules:
        module.add_args(p)
    for name, default in plain.items():
        p.add_argument(f"--{name}", default=default)
    return p


def refusal(module, parser, argv, capsys):
    """The text module.check_args prints when it refuses `argv` (argparse's usage and 'error: ...'), or None."""
    args = parser.parse_args(argv)
    try:
        module.check_args(args, parser)
    except SystemExit:
        return capsys.readouterr().err
    return None


def _first_with(places, names):
    for place in places:
        if all((place / name).exists() for name in names):
            return place
    return None


def real_cs224n_dir(*names: str) -> Path | None:
    """The first folder ($MINBERT_DATA/cs224n, then data/) holding every named CS224N file; None if none does."""
    return _first_with(CS224N_PLACES, names)


def real_glue_dir(*tasks: str) -> Path | None:
    """The first glue_data-layout folder ($MINBERT_DATA/glue, then data/glue_data) holding a folder for every
    named task (STS-B* reads STS-B/); None if none does."""
    return _first_with(GLUE_PLACES, [t.rstrip("*") for t in tasks])


def needs_cs224n(*names: str):
    """skipif marker: skip only when no known place holds the named CS224N files."""
    return pytest.mark.skipif(real_cs224n_dir(*names) is None,
                              reason=f"{', '.join(names)} found in none of {[str(p) for p in CS224N_PLACES]}")


def needs_glue(*tasks: str):
    """skipif marker: skip only when no known place holds the named GLUE tasks."""
    return pytest.mark.skipif(real_glue_dir(*tasks) is None,
                              reason=f"GLUE {', '.join(tasks)} found in none of {[str(p) for p in GLUE_PLACES]}")


GLUE_FIXTURES = REPO / "tests" / "fixtures" / "glue"   # QNLI, SST-2, WNLI: a few rows of each real file


def glue_files(task: str) -> tuple[Path, bool]:
    """(folder, whole): the first place with the full GLUE files of `task`, whole=True; else the folder of
    tests/fixtures/glue (made by tests/fixtures/make_glue_fixtures.py from the real files), whole=False."""
    place = real_glue_dir(task)
    return (place, True) if place is not None else (GLUE_FIXTURES, False)


class WordTokenizer:
    """Stand-in for minbert.bert.tokenizer.Tokenizer with the same two methods: one id per whitespace word,
    [CLS] a [SEP] (b [SEP]) with token types 0 for a and 1 for b, padding with id 0."""

    CLS, SEP = 101, 102

    def __init__(self):
        self.vocab = {}
        self.encode_calls = 0

    def _ids(self, text):
        return [self.vocab.setdefault(w, 1000 + len(self.vocab)) for w in text.split()]

    def encode(self, texts, pairs, max_length):
        self.encode_calls += 1
        all_ids, all_types = [], []
        for i, text in enumerate(texts):
            a = self._ids(text)
            if pairs is None:
                ids = [self.CLS] + a[:max_length - 2] + [self.SEP]
                types = [0] * len(ids)
            else:
                b = self._ids(pairs[i])
                while len(a) + len(b) + 3 > max_length:  # truncate the longer sentence first
                    (a if len(a) >= len(b) else b).pop()
                ids = [self.CLS] + a + [self.SEP] + b + [self.SEP]
                types = [0] * (len(a) + 2) + [1] * (len(b) + 1)
            all_ids.append(ids)
            all_types.append(types)
        return all_ids, all_types

    def pad(self, ids, type_ids):
        B, T = len(ids), max(len(x) for x in ids)
        out = {k: torch.zeros(B, T, dtype=torch.long) for k in ("input_ids", "attention_mask", "token_type_ids")}
        for row, (x, t) in enumerate(zip(ids, type_ids)):
            out["input_ids"][row, :len(x)] = torch.tensor(x)
            out["attention_mask"][row, :len(x)] = 1
            out["token_type_ids"][row, :len(x)] = torch.tensor(t)
        return out


def make_examples(n: int, pairs: bool = False, seed: int = 0) -> list:
    """n Examples (minbert.tasks.data) of 1-25 words "w0".."w29", labels 0-4; pairs: a second sentence too."""
    import random
    from minbert.tasks.data import Example
    rng = random.Random(seed)

    def sentence():
        return " ".join(f"w{rng.randrange(30)}" for _ in range(rng.randint(1, 25)))

    return [Example(f"ex{i}", sentence(), sentence() if pairs else None, rng.randrange(5)) for i in range(n)]


def tiny_run_inputs(root):
    """The CS224N-format files and the tiny model (with MiniLM's vocabulary) of test_train_multitask."""
    from minbert.bert.config import BertConfig
    from minbert.bert.model import BertModel
    from minbert.bert.tokenizer import Tokenizer
    data, model = root / "data", root / "model"
    data.mkdir()
    write_task_files(data)
    torch.manual_seed(0)
    BertModel(BertConfig.tiny()).save_pretrained(model, tokenizer=Tokenizer.from_pretrained("minilm-l6"))
    return data, model


def bench_script(name: str):
    """bench/NAME.py as a module (the bench scripts are files, not a package), with bench/ on sys.path while it loads,
    so that a script importing a sibling (time_to_accuracy imports readme_times) finds it."""
    import importlib.util
    import sys
    bench = Path(__file__).resolve().parents[1] / "bench"
    spec = importlib.util.spec_from_file_location(name, bench / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(bench))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(bench))
    return module
