"""Grades complete model folders (BertModel.save_pretrained, Tokenizer.save_pretrained) and stage
chaining (minbert/core/export.py, --init_from, --pals_after, --model RUN_DIR/model).

Oracles: (b) live — Hugging Face's BertTokenizer reads our saved folder and gives the same ids;
(c) properties — save -> from_pretrained round-trips every tensor exactly and the vocabulary byte
for byte; --init_from copies heads exactly and refuses other shapes; a chained pipeline
(SimCSE -> multitask -> PALs after fine-tuning -> MML) runs end to end on tiny data, each stage
loading the previous stage's folder and recording where it started.
"""

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import train_mml
import train_multitask
from minbert.core import export, hub
from minbert.tools import simcse_stage
from minbert.bert.config import BertConfig
from minbert.bert.model import BertModel
from minbert.bert.tokenizer import Tokenizer
from minbert.core.errors import UserError
from minbert.methods.pals import PALs
from minbert.tasks.multitask import MultitaskBert
from conftest import tiny_run_inputs
from conftest import write_glue

FILES = ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json")
TEXTS = ["The movie was surprisingly good.", "Ünïcödé and CAPITALS, unknownwordzzz!", "[MASK] it"]


def test_save_pretrained_writes_a_complete_folder_that_round_trips_exactly(tmp_path):
    original = BertModel.from_pretrained("minilm-l6")
    original.save_pretrained(tmp_path)
    missing = [f for f in FILES if not (tmp_path / f).is_file()]
    assert not missing, f"minbert.bert.model.BertModel.save_pretrained: folder lacks {missing}"
    loaded = BertModel.from_pretrained(tmp_path)
    ours, theirs = original.state_dict(), loaded.state_dict()
    assert ours.keys() == theirs.keys()
    for k in ours:
        assert torch.equal(ours[k], theirs[k]), f"minbert.bert.model.BertModel.save_pretrained -> from_pretrained: {k} changed"
    assert (tmp_path / "vocab.txt").read_bytes() == (hub.resolve("minilm-l6") / "vocab.txt").read_bytes(), \
        "minbert.bert.tokenizer.Tokenizer.save_pretrained: vocab.txt must be a byte copy"
    a, b = Tokenizer.from_pretrained("minilm-l6"), Tokenizer.from_pretrained(tmp_path)
    assert a.encode(TEXTS) == b.encode(TEXTS) and b.lowercase, "Tokenizer.from_pretrained(saved folder): different ids"
    from transformers import BertTokenizer   # the folder is a Hugging Face tokenizer folder too
    hf = BertTokenizer.from_pretrained(str(tmp_path))
    assert [hf(t)["input_ids"] for t in TEXTS] == a.encode(TEXTS)[0], "HF BertTokenizer on our saved folder: different ids"


def test_save_pretrained_of_a_bare_model_warns_and_takes_a_tokenizer(tmp_path):
    model = BertModel(BertConfig.tiny())
    with pytest.warns(UserWarning, match="no vocab.txt"):
        model.save_pretrained(tmp_path / "bare")
    model.save_pretrained(tmp_path / "full", tokenizer=Tokenizer.from_pretrained("minilm-l6"))
    assert all((tmp_path / "full" / f).is_file() for f in FILES), "save_pretrained(tokenizer=...): folder incomplete"
    Tokenizer.from_pretrained(tmp_path / "full")


def tiny_multitask(head="linear", pals=False, seed=0):
    torch.manual_seed(seed)
    cfg = BertConfig.tiny()
    return MultitaskBert(BertModel(cfg), head=head, pals=PALs(cfg, ["sst", "para", "sts"], 12, 3) if pals else None)


def test_init_from_copies_matching_heads_and_refuses_other_shapes(tmp_path):
    source = tiny_multitask(seed=1)
    tok = Tokenizer.from_pretrained("minilm-l6")
    export.export(tmp_path / "model", source.encoder, tok, {"heads": source.heads, "pals": source.pals})
    target = tiny_multitask(pals=True, seed=2)
    report = export.init_from(tmp_path, {"heads": target.heads, "pals": target.pals})
    for k, v in source.heads.state_dict().items():
        assert torch.equal(v, target.heads.state_dict()[k]), f"minbert.core.export.init_from: heads.{k} not copied"
    assert report["fresh"] and all(k.startswith("pals.") for k in report["fresh"]), \
        f"minbert.core.export.init_from: PALs the source lacks must be listed as fresh, got {report['fresh']}"
    with pytest.raises(UserError, match="--head"):
        export.init_from(tmp_path, {"heads": tiny_multitask(head="mlp").heads})
    with pytest.raises(UserError, match="not an exported model"):
        export.model_dir(tmp_path / "nowhere")


def encoder_tensors(run_dir):
    return load_file(str(run_dir / "model" / "model.safetensors"))


def test_chained_pipeline_simcse_multitask_pals_after_mml_runs_end_to_end(tmp_path):
    data, model = tiny_run_inputs(tmp_path)
    common = ["--data_dir", str(data), "--epochs", "1", "--batch_size", "4", "--lr", "1e-3",
              "--hidden_dropout_prob", "0.1", "--limit", "12", "--seed", "3", "--device", "cpu", "--amp", "off"]
    preds = lambda d: sum(([f"--{t}_{s}_out", str(d / f"{t}-{s}.csv")] for t in ("sst", "para", "sts") for s in ("dev", "test")), [])

    # 1) SimCSE writes an encoder folder
    simcse_stage.main(["--model", str(model), "--data", "cs224n", "--data_dir", str(data), "--limit", "12",
                       "--batch_size", "4", "--max_steps", "2", "--device", "cpu", "--amp", "off",
                       "--out_dir", str(tmp_path / "simcse")])
    assert all((tmp_path / "simcse" / "model" / f).is_file() for f in FILES), "minbert.tools.simcse_stage.main: exported folder incomplete"

    # 2) multitask fine-tuning from the SimCSE encoder: writes model/, outputs.pt, stage.json
    run1 = tmp_path / "run1"
    train_multitask.main(["--model", str(tmp_path / "simcse" / "model"), "--out_dir", str(run1), *common, *preds(run1)])
    assert all((run1 / "model" / f).is_file() for f in FILES + ("task_modules.safetensors", "stage.json"))
    assert (run1 / "outputs.pt").is_file(), "train_multitask.py: no outputs.pt for minbert.tools.ensemble"
    stage = json.loads((run1 / "stage.json").read_text())
    assert stage["model"] == str(tmp_path / "simcse" / "model"), f"train_multitask.py: stage.json must record the model it started from, got {stage}"

    # 3) PALs after fine-tuning: the encoder and heads of run1 come back unchanged, only PALs trained
    run2 = tmp_path / "run2"
    train_multitask.main(["--pals_after", str(run1), "--pals_size", "12", "--pals_heads", "3", "--out_dir", str(run2), *common, *preds(run2)])
    stage = json.loads((run2 / "stage.json").read_text())
    assert stage["init_from"]["loaded"] and all(k.startswith("heads.") for k in stage["init_from"]["loaded"]), \
        f"--pals_after: stage.json must list the heads loaded from run1, got {stage['init_from']}"
    first, second = encoder_tensors(run1), encoder_tensors(run2)
    assert all(torch.equal(first[k], second[k]) for k in first), "--pals_after: the encoder changed; only PALs may train"
    heads1 = load_file(str(run1 / "model" / "task_modules.safetensors"))
    heads2 = load_file(str(run2 / "model" / "task_modules.safetensors"))
    assert all(torch.equal(heads1[k], heads2[k]) for k in heads1), "--pals_after: the heads changed without --pals_after_heads"
    assert any(k.startswith("pals.V_D") and heads2[k].any() for k in heads2), "--pals_after: V_D never left 0 (PALs did not train)"
    stage_json = (run2 / "stage.json").read_bytes()   # --predict_only leaves the run's record of where it started
    train_multitask.main(["--pals_after", str(run1), "--pals_size", "12", "--pals_heads", "3", "--out_dir", str(run2),
                          *common, *preds(run2 / "again"), "--predict_only", "--resume", str(run2 / "best.pt")])
    assert (run2 / "stage.json").read_bytes() == stage_json, "--predict_only rewrote stage.json (minbert/run/stages.py)"

    # 4) MML fine-tuning from the multitask encoder (Muppet's second stage, encoder only)
    glue = tmp_path / "glue"
    write_glue(glue)
    train_mml.main(["--task", "RTE", "--method", "bert", "--model", str(run1 / "model"), "--glue_dir", str(glue),
                    "--out_dir", str(tmp_path / "mml"), "--epochs", "1", "--batch_size", "4", "--limit", "8",
                    "--device", "cpu", "--amp", "off"])
    assert all((tmp_path / "mml" / "model" / f).is_file() for f in FILES), "train_mml.py: exported folder incomplete"
    assert BertModel.from_pretrained(tmp_path / "mml" / "model") is not None


def test_the_docs_transformers_lines_load_a_run_folder_as_minbert_does(tmp_path):
    """docs/predict.md shows the `transformers` lines that load RUN_DIR/model; run as written (on a run folder of a
    tiny model with heads), their last_hidden_state equals minbert's encoder output at the real tokens to 1e-5."""
    pytest.importorskip("transformers")
    import re
    from conftest import save_tiny_model
    doc = (Path(__file__).resolve().parents[2] / "docs" / "predict.md").read_text()
    block = re.search(r"```python\n(from transformers import AutoModel.*?)```", doc, re.S)
    assert block, "docs/predict.md must show the transformers lines that load RUN_DIR/model (a python block)"
    model = tiny_multitask(seed=3)
    folder = save_tiny_model(tmp_path / "base")
    export.export(tmp_path / "run" / "model", BertModel.from_pretrained(folder), Tokenizer.from_pretrained(folder),
                  {"heads": model.heads})
    scope = {}
    exec(block.group(1).replace("runs/quickstart/model", str(tmp_path / "run" / "model")), scope)
    ours = BertModel.from_pretrained(tmp_path / "run" / "model").eval()
    batch = scope["batch"]
    with torch.no_grad():
        want = ours(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])["last_hidden_state"]
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(scope["hidden"].detach()[real], want[real], atol=1e-5, rtol=0,
                               msg=lambda m: f"docs/predict.md's transformers lines: HF's encoder differs from ours\n{m}")
