"""Grades minbert/tools/trained_run.py: a finished run loaded for use (minbert.load_run), on tiny real runs.

Oracles: (c) the training scripts' own outputs for the same rows — train_multitask.py's prediction files (labels
equal; STS scores to 1e-5) and outputs.pt (probabilities from its raw logits to 1e-5), for a cross-encoder run on
the pooler and a bi-encoder run with mean pooling; train_mml.py's Eq. 5 (Malkiel & Wolf) computed by hand from the
stored heads, only the active ones. Properties: input order kept, batch size 1 equals 64 (to 1e-5), every bad
input one UserError. Hostile folders (a pickle instead of safetensors, flags asking for a huge model, tensors
that do not fit, a value outside the flags' choices) are refused before anything runs or allocates.
"""

import json
import pickle
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file, save_file

import minbert
import train_mml
import train_multitask
from conftest import save_tiny_model, write_glue, write_task_files
from minbert.core.errors import UserError
from minbert.core.export import load_outputs
from minbert.tasks.data import read_quora, read_sst, read_sts
from minbert.tasks.glue import read_glue

ROOT = Path(__file__).resolve().parents[2]
ATOL = 1e-5   # the same batches as the scripts' evaluation: equal up to summation order


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three finished tiny runs: multitask on the pooler with cross-encoder pairs (the handout's defaults), multitask
    with mean pooling and bi-encoder pair heads, and MML with 8 heads of which elimination removes some."""
    root = tmp_path_factory.mktemp("trained")
    data, model, glue = root / "data", root / "model", root / "glue"
    data.mkdir()
    write_task_files(data)
    save_tiny_model(model)
    write_glue(glue)
    common = ["--model", str(model), "--data_dir", str(data), "--epochs", "1", "--batch_size", "4", "--lr", "1e-3",
              "--device", "cpu", "--amp", "off", "--seed", "3"]
    train_multitask.main(common + ["--out_dir", str(root / "pooler")])
    train_multitask.main(common + ["--out_dir", str(root / "bi"), "--pooling", "mean", "--para_head", "siamese",
                                   "--sts_head", "cosine"])
    train_mml.main(["--task", "RTE", "--model", str(model), "--glue_dir", str(glue), "--out_dir", str(root / "mml"),
                    "--epochs", "1", "--batch_size", "4", "--lr", "1e-3", "--heads", "8", "--eliminate_every", "3",
                    "--min_bandwidth", "0.001",
                    "--device", "cpu", "--amp", "off", "--seed", "3"])
    return SimpleNamespace(root=root, data=data, glue=glue, pooler=root / "pooler", bi=root / "bi", mml=root / "mml")


def written(path) -> dict:
    """{id: value} of a prediction file in the handout's format."""
    rows = [line.split(" , ") for line in Path(path).read_text().splitlines()[1:]]
    return {i.strip(): float(v) for i, v in rows}


def numbers(records) -> torch.Tensor:
    """Every number of predict's records, in order (a list of probabilities flattened)."""
    return torch.tensor([x for r in records for v in r.values() if not isinstance(v, str)
                         for x in (v if isinstance(v, list) else [v])], dtype=torch.float64)


@pytest.mark.parametrize("kind", ["pooler", "bi"])
def test_predictions_equal_the_training_scripts_own_files(runs, kind):
    run = minbert.load_run(getattr(runs, kind), device="cpu", amp="off")
    files = getattr(runs, kind) / "predictions"
    raw = load_outputs(getattr(runs, kind))
    sst = read_sst(runs.data / "ids-sst-dev.csv")
    got = run.sentiment([e.text for e in sst])
    want = written(files / "sst-dev-output.csv")
    assert [g["label"] for g in got] == [int(want[e.id]) for e in sst], \
        f"minbert.tools.trained_run ({kind}): SST labels differ from the script's sst-dev-output.csv"
    order = {i: k for k, i in enumerate(raw["dev"]["sst"]["ids"])}
    logits = raw["dev"]["sst"]["outputs"][[order[e.id] for e in sst]]
    probs = torch.tensor([g["probabilities"] for g in got])
    assert torch.allclose(probs, logits.softmax(-1), atol=ATOL), \
        f"minbert.tools.trained_run ({kind}): SST probabilities differ from softmax of the script's outputs.pt logits"
    quora = read_quora(runs.data / "quora-dev.csv")
    para = run.paraphrase([(e.text, e.text2) for e in quora])
    want = written(files / "para-dev-output.csv")
    assert [int(p > 0.5) for p in para] == [int(want[e.id]) for e in quora], \
        f"minbert.tools.trained_run ({kind}): paraphrase labels (probability > 0.5) differ from para-dev-output.csv"
    sts = read_sts(runs.data / "sts-dev.csv")
    scores = torch.tensor(run.similarity([(e.text, e.text2) for e in sts]))
    want = written(files / "sts-dev-output.csv")
    assert torch.allclose(scores, torch.tensor([want[e.id] for e in sts]), atol=ATOL), \
        f"minbert.tools.trained_run ({kind}): STS scores differ from sts-dev-output.csv by more than {ATOL}"
    test = read_sst(runs.data / "ids-sst-test-student.csv", labeled=False)
    want = written(files / "sst-test-output.csv")
    assert [g["label"] for g in run.sentiment([e.text for e in test])] == [int(want[e.id]) for e in test], \
        f"minbert.tools.trained_run ({kind}): SST test labels differ from sst-test-output.csv"


def test_mml_is_eq_5_over_the_active_heads_only(runs):
    """ŷ = Σ_j β_j C_j(d) / Σ_j β_j, softmax for classification (Malkiel & Wolf, Eq. 5), by hand from the stored
    heads and the encoder's pooler output; some heads were eliminated, so a mean over all M would differ."""
    from minbert.bert.model import BertModel
    from minbert.bert.tokenizer import Tokenizer
    folder = runs.mml / "model"
    stored = load_file(str(folder / "task_modules.safetensors"))
    active = stored["heads.active"]
    assert 0 < int(active.sum()) < len(active), f"the fixture needs eliminated heads; active {active.tolist()}"
    rows = read_glue(runs.glue, "RTE", "dev")
    pairs = [(e.text, e.text2) for e in rows]
    encoder = BertModel.from_pretrained(folder).eval()
    batch = Tokenizer.from_pretrained(folder)([a for a, _ in pairs], [b for _, b in pairs], max_length=128)
    with torch.no_grad():
        d = encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])["pooler_output"]  # (N, D)
    W, b = stored["heads.weight"][active], stored["heads.bias"][active]                  # (A, K, D), (A, K)
    expected = (torch.einsum("nd,akd->nak", d, W) + b).mean(1).softmax(-1)               # (N, K)
    run = minbert.load_run(runs.mml, device="cpu", amp="off")
    got = torch.tensor([r["probabilities"] for r in run.classify(pairs)])
    assert torch.allclose(got, expected, atol=ATOL), \
        "minbert.tools.trained_run.MMLRun.classify: not Eq. 5 (softmax of the mean logit of the ACTIVE heads)"
    accuracy = float((got.argmax(-1) == torch.tensor([e.label for e in rows])).float().mean())
    scored = json.loads((runs.mml / "metrics.jsonl").read_text().splitlines()[0])["accuracy"]
    assert abs(accuracy - scored) < 1e-9, f"dev accuracy {accuracy} differs from train_mml.py's own {scored}"


def test_input_order_is_kept_and_batch_size_changes_nothing(runs):
    sentences = [e.text for e in read_sst(runs.data / "ids-sst-dev.csv")]
    shuffled = sentences[::-1][::2] + sentences[::-1][1::2]
    batched = minbert.load_run(runs.pooler, device="cpu", amp="off")
    single = minbert.load_run(runs.pooler, device="cpu", amp="off", batch_size=1)
    a = torch.tensor([r["probabilities"] for r in batched.sentiment(sentences)])
    b = torch.tensor([r["probabilities"] for r in batched.sentiment(shuffled)])
    index = {s: i for i, s in enumerate(sentences)}
    assert torch.allclose(b, a[[index[s] for s in shuffled]], atol=ATOL), \
        "minbert.tools.trained_run: the answers do not follow the order of the inputs"
    c = torch.tensor([r["probabilities"] for r in single.sentiment(sentences)])
    assert torch.allclose(a, c, atol=ATOL), "minbert.tools.trained_run: batch sizes 1 and 64 give other probabilities"


@pytest.mark.parametrize("kind, inputs", [("pooler", ["good movie", "dull plot"]),
                                           ("mml", [("the cat sat", "a cat sat")])])
def test_a_file_of_the_run_folder_loads_that_run(runs, kind, inputs):
    """`minbert.load_run(RUN / "best.pt")`, as the docstrings promise: the run of the folder that holds the file,
    with the answers of load_run(RUN) (the same tensors: equal to 1e-5)."""
    folder = getattr(runs, kind)
    by_folder = minbert.load_run(folder, device="cpu", amp="off").predict(inputs)
    by_file = minbert.load_run(folder / "best.pt", device="cpu", amp="off").predict(inputs)
    assert len(by_file) == len(inputs) and torch.allclose(numbers(by_file), numbers(by_folder), atol=ATOL), \
        f"minbert.load_run({kind}/best.pt) answers otherwise than load_run({kind}): {by_file} vs {by_folder}"


def test_predict_runs_only_the_heads_asked_for(runs, monkeypatch):
    run = minbert.load_run(runs.pooler, device="cpu", amp="off")
    ran = []
    real = run.model.head
    monkeypatch.setattr(run.model, "head", lambda task, u, v=None: ran.append(task) or real(task, u, v))
    records = run.predict([("good movie", "nice film")], tasks=["sts"])
    assert set(ran) == {"sts"} and list(records[0]) == ["sentence1", "sentence2", "sts_score"], \
        f"predict(tasks=['sts']) ran the heads {sorted(set(ran))} and returned {records}"
    assert list(run.predict(["good movie"])[0]) == ["sentence", "sst_label", "sst_name", "sst_probabilities"]
    assert run.sentiment(["good movie"])[0]["name"] in ("negative", "somewhat negative", "neutral",
                                                         "somewhat positive", "positive")


@pytest.mark.parametrize("inputs, tasks, message", [
    (["good movie", "  "], None, "input 2: an empty sentence"),
    (["good movie", "nice film ||| "], None, "input 2: an empty sentence"),
    (["good movie", ("a", "b")], ["sst"], "input 2 is a pair, but sst reads one sentence each"),
    (["good movie"], ["sentiment"], "unknown task 'sentiment'"),
    (["good movie"], ["para"], "input 1 is one sentence, but para reads sentence pairs"),
    (["a ||| b ||| c"], None, "input 1: 3 sentences"),
], ids=["empty", "half_a_pair", "pair_for_sst", "unknown_task", "wrong_kind", "three_sentences"])
def test_bad_input_is_one_line(runs, inputs, tasks, message):
    run = minbert.load_run(runs.pooler, device="cpu", amp="off")
    with pytest.raises(UserError) as e:
        run.predict(inputs, tasks)
    assert message in str(e.value) and "\n" not in str(e.value), f"expected one line with {message!r}: {e.value}"


@pytest.mark.parametrize("separator", [" ||| ", "\t"])
def test_a_string_with_three_bars_or_a_tab_is_a_pair_in_python_as_on_the_command_line(runs, separator):
    """`run.predict(["a ||| b"])` is the pair ("a", "b"), as `python -m minbert predict RUN "a ||| b"` reads it (it
    was one SST sentence in Python, with no warning); paraphrase and similarity read it so too."""
    run = minbert.load_run(runs.pooler, device="cpu", amp="off")
    typed = run.predict([f"good movie{separator}nice film"])
    assert list(typed[0])[:2] == ["sentence1", "sentence2"] and "sst_label" not in typed[0], \
        f"minbert.tools.trained_run: {separator.strip() or 'tab'!r} in a string must make it a pair, got {typed}"
    pair = run.predict([("good movie", "nice film")])
    assert typed[0]["sentence2"] == "nice film" and torch.allclose(numbers(typed), numbers(pair), atol=ATOL), \
        f"a typed pair answered otherwise than the tuple: {typed} vs {pair}"
    assert run.similarity([f"good movie{separator}nice film"]) == [pair[0]["sts_score"]], "similarity: not the pair"


def test_sentences_and_pairs_mixed_are_answered_line_by_line(runs):
    """A mix (what sentence-transformers users pass) gets, for each input, what it would get alone."""
    run = minbert.load_run(runs.pooler, device="cpu", amp="off")
    mixed = run.predict(["good movie", "nice film ||| a good movie", ("dull plot", "boring story"), "dull plot"])
    singles = run.predict(["good movie", "dull plot"])
    pairs = run.predict([("nice film", "a good movie"), ("dull plot", "boring story")])
    assert [sorted(r) for r in mixed] == [sorted(singles[0]), sorted(pairs[0]), sorted(pairs[1]), sorted(singles[1])], \
        f"minbert.tools.trained_run: a mix must give each input its own kind of record, got {mixed}"
    expected = numbers([singles[0], pairs[0], pairs[1], singles[1]])
    assert torch.allclose(numbers(mixed), expected, atol=ATOL), "a mix answered otherwise than each kind alone"


def copy_run(runs, tmp_path) -> Path:
    import shutil
    return Path(shutil.copytree(runs.pooler / "model", tmp_path / "model"))


def test_a_folder_that_is_not_a_run_is_one_line(runs, tmp_path):
    for folder, message in ((tmp_path / "nowhere", "no such folder"), (runs.data, "not a finished run")):
        with pytest.raises(UserError, match=message) as e:
            minbert.load_run(folder)
        assert "\n" not in str(e.value), f"one line, got: {e.value}"


def test_a_pickle_in_place_of_safetensors_is_never_loaded(runs, tmp_path):
    """A shared folder with pytorch_model.bin (a pickle: loading it may run any code) instead of model.safetensors."""
    folder = copy_run(runs, tmp_path)
    (folder / "model.safetensors").unlink()
    ran = tmp_path / "pickle-ran"

    class Payload:
        def __reduce__(self):
            return (Path.touch, (ran,))
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(Payload()))
    with pytest.raises(UserError, match="never read"):
        minbert.load_run(folder)
    assert not ran.exists(), "minbert.tools.trained_run: loading a run executed the pickle in it"


@pytest.mark.parametrize("edit, message", [
    (lambda a: a["multitask"].update(head="mlp", head_layers=1000), "does not fit.*Missing key"),
    (lambda a: a["multitask"].update(pooling="evil"), "describe no train_multitask.py model.*pooling must be one of"),
    (lambda a: a.update(pals={"size": 10 ** 6, "heads": 1}), "does not fit.*Missing key"),
    (lambda a: a.update(max_seq_len=[1, 2]), r"max_seq_len \[1, 2\]; expected an integer"),
    (lambda a: a["multitask"].update(head="mlp", head_layers="x"), "describe no train_multitask.py model.*TypeError"),
], ids=["huge_mlp", "unknown_pooling", "huge_pals", "a_list", "a_word"])
def test_hostile_records_are_refused_before_anything_is_built(runs, tmp_path, edit, message):
    folder = copy_run(runs, tmp_path)
    stage = json.loads((folder / "stage.json").read_text())
    edit(stage["model_args"])
    (folder / "stage.json").write_text(json.dumps(stage))
    with pytest.raises(UserError, match=message) as e:
        minbert.load_run(folder)
    assert "\n" not in str(e.value), f"one line, got: {e.value}"


def test_tensors_that_do_not_fit_are_refused(runs, tmp_path):
    folder = copy_run(runs, tmp_path)
    tensors = load_file(str(folder / "task_modules.safetensors"))
    save_file(tensors | {"heads.extra": torch.zeros(1)}, str(folder / "task_modules.safetensors"))
    with pytest.raises(UserError, match='does not fit.*Unexpected key.*"heads.extra"'):
        minbert.load_run(folder)
    save_file({k: v for k, v in tensors.items() if k != "heads.sst.1.bias"}, str(folder / "task_modules.safetensors"))
    with pytest.raises(UserError, match='does not fit.*Missing key.*"heads.sst.1.bias"'):
        minbert.load_run(folder)


@pytest.mark.parametrize("kind", ["pooler", "mml"])
def test_the_record_names_the_script_and_the_model_arguments(runs, kind):
    """stage.json says which script made the model and its keyword arguments; a run exported before it held that
    record (only the flags, "args") loads from its run folder's run.json and gives the same answers."""
    import shutil
    stage = json.loads((getattr(runs, kind) / "model" / "stage.json").read_text())
    script = "train_mml.py" if kind == "mml" else "train_multitask.py"
    assert stage["script"] == script and stage["model_args"]["max_seq_len"] == 128, \
        f"minbert/core/export.py: stage.json lacks the record of the {script} model: {stage.get('model_args')}"
    older = Path(shutil.copytree(getattr(runs, kind), getattr(runs, kind).parent / f"{kind}-older"))
    (older / "model" / "stage.json").write_text(json.dumps({k: v for k, v in stage.items()
                                                            if k not in ("script", "model_args")}))
    inputs = [("good movie", "nice film"), ("bad plot", "dull actor")] if kind == "mml" else ["good movie", "bad"]
    want = minbert.load_run(getattr(runs, kind), device="cpu", amp="off").predict(inputs)
    assert minbert.load_run(older, device="cpu", amp="off").predict(inputs) == want, \
        "minbert.tools.trained_run: a run exported with only its flags answers differently"


@pytest.mark.parametrize("status, resumable, says", [
    ("running", True, "still training it .* continues it"),
    ("stopped, resumable", True, "was interrupted .* finishes it"),
    ("failed", False, "stopped before it finished"),
])
def test_a_run_not_finished_says_which_and_names_the_resume_line(runs, tmp_path, status, resumable, says):
    from minbert.tools import export_hf, predict
    folder = tmp_path / "run"
    folder.mkdir()
    command = ["train_multitask.py", "--epochs", "3", "--out_dir", str(folder), "--resume", "old.pt"]
    (folder / "run.json").write_text(json.dumps({"script": "train_multitask.py", "status": status,
                                                  "started": "2026-01-01T00:00:00",
                                                  "sessions": [{"started": "x", "command": command}]}))
    if resumable:
        (folder / "interrupted.pt").write_bytes(b"")
    resume = f"`python train_multitask.py --epochs 3 --out_dir {folder} --resume {folder / 'interrupted.pt'}`"
    for name, call in (("load_run", lambda: minbert.load_run(folder)),
                       ("predict", lambda: predict.main([str(folder), "good movie"])),
                       ("export-hf", lambda: export_hf.main([str(folder), str(tmp_path / "hf")]))):
        with pytest.raises(UserError, match=says) as e:
            call()
        assert (resume in str(e.value)) == resumable and "\n" not in str(e.value), \
            f"{name} on a run whose run.json says {status!r}: expected one line naming {resume}, got: {e.value}"


def test_import_minbert_stays_light():
    """minbert.load_run is in the package's top, so `import minbert` must not pull in torch."""
    out = subprocess.run([sys.executable, "-c", "import minbert, sys; print('torch' in sys.modules)"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", f"`import minbert` imported torch: {out.stdout}{out.stderr}"


@pytest.mark.parametrize("argv", [["--pals", "--pals_size", "8", "--pals_heads", "2", "--r3f", "1", "--r4f"],
                                  ["--head", "mlp", "--head_layers", "2", "--sts_head", "cross_tanh"]],
                         ids=["pals_r4f", "mlp_tanh"])
def test_a_model_is_rebuilt_from_its_record_alone(tmp_path, argv):
    """What the export writes (the record, the tensors) rebuilds the same model: PALs inside the encoder, R4F's
    spectrally normalised heads, MLP heads and the tanh-scaled STS head answer as the model that was exported."""
    from minbert.bert.model import BertModel
    from minbert.bert.tokenizer import Tokenizer
    from minbert.core import export
    from minbert.methods import pals, r3f
    from minbert.tasks import multitask
    from minbert.tasks.multitask import TASKS
    from minbert.tools import trained_run
    args = train_multitask.parse_args(["--model", str(save_tiny_model(tmp_path / "base")), *argv])
    encoder = BertModel.from_pretrained(args.model)
    model = multitask.from_args(args, encoder, pals.from_args(args, encoder.config, TASKS))
    r3f.from_args(args, model)
    torch.manual_seed(0)
    for p in model.parameters():   # not the initial values, so a head left fresh would show
        p.data.normal_(0, 0.1)
    tokenizer = Tokenizer.from_pretrained(args.model)
    export.export(tmp_path / "run" / "model", encoder, tokenizer, {"heads": model.heads, "pals": model.pals},
                  {"args": vars(args)}, "train_multitask.py",
                  trained_run.model_args("train_multitask.py", args, encoder.config.hidden_size))
    run = minbert.load_run(tmp_path / "run", device="cpu", amp="off")
    pairs = [("good movie", "nice film"), ("a dull plot", "the actor")]
    batch = tokenizer([a for a, _ in pairs], [b for _, b in pairs], max_length=128)
    with torch.no_grad():
        want = model.eval()("sts", batch)
    got = torch.tensor(run.similarity(pairs))
    assert torch.allclose(got, want, atol=ATOL), f"rebuilt from the record ({argv}): STS {got} vs the model's {want}"
