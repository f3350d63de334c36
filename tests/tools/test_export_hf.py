"""Grades `python -m minbert export-hf` (minbert/tools/export_hf.py, minbert/core/export.py export_hf_classifier).

Oracle: (b) live — Hugging Face `transformers.pipeline("text-classification")` on the exported folder agrees with
minbert's own answers (minbert.load_run) to 1e-5: SST-5 with the handout's label names, the paraphrase
probability (a sigmoid, as BCE trained it), the STS score (regression), and an MML run whose eliminated heads
must stay out of the exported average. Properties: a head of another shape is refused in one line that says
why, and writes nothing; an OUT_DIR that holds files is never replaced without --overwrite.
"""

import pytest
import torch

import minbert
import train_multitask
from minbert.bert.model import BertModel
from minbert.bert.tokenizer import Tokenizer
from minbert.core import export
from minbert.core.errors import UserError
from minbert.methods import pals
from minbert.tasks import multitask
from minbert.tasks.multitask import SST_LABELS, TASKS
from minbert.tools import export_hf, trained_run
from test_trained_run import runs  # noqa: F401  (fixture: three finished tiny runs)

SENTENCES = ["good movie", "bad plot and dull actor", "a fun story with a great actor and a nice plot"]
PAIRS = [("good movie", "nice film"), ("the plot", "a fun story"), ("boring smart dull", "dull")]


def hf_pipeline(folder):
    transformers = pytest.importorskip("transformers")
    return transformers.pipeline("text-classification", model=str(folder), top_k=None, device="cpu")


def scores(answer: list[dict]) -> dict:
    return {a["label"]: a["score"] for a in answer}


def test_pipeline_on_the_exported_sst_head_agrees_with_minbert(runs, tmp_path):
    export_hf.main([str(runs.pooler), str(tmp_path / "sst")])
    ours = minbert.load_run(runs.pooler, device="cpu", amp="off").sentiment(SENTENCES)
    theirs = hf_pipeline(tmp_path / "sst")(SENTENCES)
    for o, t in zip(ours, theirs):
        assert set(scores(t)) == set(SST_LABELS), f"the exported id2label must be the handout's names, got {t}"
        got = torch.tensor([scores(t)[name] for name in SST_LABELS])
        assert torch.allclose(got, torch.tensor(o["probabilities"]), atol=1e-5), \
            f"transformers.pipeline on the export: {got.tolist()}, minbert: {o['probabilities']}"


@pytest.mark.parametrize("task", ["para", "sts"])
def test_pipeline_on_an_exported_pair_head_agrees_with_minbert(runs, tmp_path, task):
    export_hf.main([str(runs.pooler), str(tmp_path / task), "--task", task])
    run = minbert.load_run(runs.pooler, device="cpu", amp="off")
    ours = run.paraphrase(PAIRS) if task == "para" else run.similarity(PAIRS)
    theirs = hf_pipeline(tmp_path / task)([{"text": a, "text_pair": b} for a, b in PAIRS])
    got = torch.tensor([t[0]["score"] for t in theirs])
    assert torch.allclose(got, torch.tensor(ours), atol=1e-5), \
        f"{task}: transformers.pipeline gives {got.tolist()}, minbert {ours}"


def test_pipeline_on_an_exported_mml_run_averages_only_the_active_heads(runs, tmp_path):
    export_hf.main([str(runs.mml), str(tmp_path / "mml")])
    run = minbert.load_run(runs.mml, device="cpu", amp="off")
    assert not bool(run.heads.active.all()), "the fixture's MML run must have eliminated heads"
    ours = run.classify(PAIRS)
    theirs = hf_pipeline(tmp_path / "mml")([{"text": a, "text_pair": b} for a, b in PAIRS])
    for o, t in zip(ours, theirs):
        got = torch.tensor([scores(t)[name] for name in run.labels])
        assert torch.allclose(got, torch.tensor(o["probabilities"]), atol=1e-5), \
            f"MML export: transformers.pipeline gives {got.tolist()}, minbert (Eq. 5) {o['probabilities']}"


def run_folder(tmp_path, *argv):
    """A run folder as train_multitask.py exports it (random tiny heads; its flags from the real parser)."""
    from conftest import save_tiny_model
    args = train_multitask.parse_args(["--model", str(save_tiny_model(tmp_path / "base")), *argv])
    encoder = BertModel.from_pretrained(args.model)
    model = multitask.from_args(args, encoder, pals.from_args(args, encoder.config, TASKS))
    export.export(tmp_path / "run" / "model", encoder, Tokenizer.from_pretrained(args.model),
                  {"heads": model.heads, "pals": model.pals}, {"args": vars(args)}, "train_multitask.py",
                  trained_run.model_args("train_multitask.py", args, encoder.config.hidden_size))
    return tmp_path / "run"


@pytest.mark.parametrize("argv, task, why", [
    (["--pooling", "mean"], "sst", "(--pooling mean); BertForSequenceClassification reads the pooler output: train "
                                   "with --pooling pooler (the default) for a pipeline folder, or export this run's "
                                   "encoder with python -m minbert export-st"),
    (["--pals", "--pals_size", "8", "--pals_heads", "2"], "sst", "PALs (--pals) add task layers inside the encoder"),
    (["--head", "mlp"], "sst", "an MLP head (--head mlp)"),
    (["--sts_head", "cosine"], "sts", "--sts_head cosine encodes the two sentences apart"),
    (["--sts_head", "cross_tanh"], "sts", "--sts_head cross_tanh scales the score by tanh"),
], ids=["mean", "pals", "mlp", "cosine", "cross_tanh"])
def test_a_head_of_another_shape_is_refused_with_the_reason(tmp_path, argv, task, why):
    folder = run_folder(tmp_path, *argv)
    with pytest.raises(UserError) as e:
        export_hf.main([str(folder), str(tmp_path / "out"), "--task", task])
    assert why in str(e.value) and "\n" not in str(e.value), f"expected one line saying {why!r}: {e.value}"
    assert not (tmp_path / "out").exists(), "a refused export must write nothing"


def out_dir_kept_without_overwrite(export, run, tmp_path, name: str, written: str) -> None:
    """An exporter refuses an OUT_DIR holding a file of the user's (`name`) and leaves it; --overwrite replaces it
    with its own (whose text holds `written`)."""
    mine = tmp_path / "out" / name
    mine.parent.mkdir()
    mine.write_text("mine")
    with pytest.raises(UserError, match="already exists.*--overwrite"):
        export([str(run), str(tmp_path / "out")])
    assert mine.read_text() == "mine", "a refused export changed the folder"
    export([str(run), str(tmp_path / "out"), "--overwrite"])
    assert written in mine.read_text(), f"--overwrite should have written {name} anew"


def test_an_out_dir_with_files_is_not_replaced_without_overwrite(runs, tmp_path):
    out_dir_kept_without_overwrite(export_hf.main, runs.pooler, tmp_path, "config.json", "BertForSequenceClassification")


def test_dry_run_makes_the_exports_checks_and_writes_nothing(runs, tmp_path, capsys):
    """--dry_run once approved what the export refuses: it now refuses the same, and approves what it would write."""
    folder = run_folder(tmp_path, "--pooling", "mean")
    for argv, why in (([str(folder), str(tmp_path / "out")], "read the mean of the token states"),
                      ([str(tmp_path / "nowhere"), str(tmp_path / "out")], "no such folder")):
        with pytest.raises(UserError, match=why):
            export_hf.main([*argv, "--dry_run"])
    with pytest.raises(SystemExit) as e:
        export_hf.main([str(runs.pooler), str(tmp_path / "out"), "--dry_run"])
    assert e.value.code == 0 and "would write" in capsys.readouterr().out, "--dry_run on an exportable run: exit 0"
    assert not (tmp_path / "out").exists(), "export-hf --dry_run wrote the folder"
