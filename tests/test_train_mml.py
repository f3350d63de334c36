"""Smoke, oracle, resume and report tests of train_mml.py and bench/mml_study.py on tiny data.

A 2-layer, 32-wide random BERT (BertConfig.tiny) with MiniLM's vocabulary and 24-row GLUE-format
fixtures keep each run to a few seconds. Oracles: (b) live — --method bert equals a hand-written
fine-tune loop (same encoder, nn.Linear head, F.cross_entropy, same seed and batch order);
(c) properties — every output is written, elimination events shrink β, resume after an interrupt
equals an uninterrupted run, cross-dataset scores lie in [0, 1], the study writes its tables.
Notation: M heads, K outputs per head, D hidden size.
"""

import json

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import train_mml
from minbert.adamw import AdamW
from minbert.bert.dropout import dropout
from minbert.bert.model import BertModel
from minbert.bert.tokenizer import Tokenizer
from minbert.core.device import seed_everything
from minbert.tasks.glue import read_glue
from minbert.tasks.sampling import BatchStream, TaskData, to_device
from conftest import save_tiny_model, signal_on_call, write_glue  # noqa: F401  (re-exported: write_glue)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("mml")
    glue, model = root / "glue", root / "model"
    write_glue(glue)
    return glue, save_tiny_model(model)


def run(setup, out, *extra, task="RTE", method="mml"):
    glue, model = setup
    args = ["--task", task, "--method", method, "--model", str(model), "--glue_dir", str(glue), "--out_dir", str(out),
            "--epochs", "2", "--batch_size", "4", "--lr", "1e-3", "--seed", "3",
            "--device", "cpu", "--amp", "off",   # the same numbers on every CPU (auto would pick bf16 on some)
            "--keep_resume_state"]   # these tests read last.pt of finished runs
    return train_mml.main(args + list(extra))


def lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_smoke_run_writes_every_output(setup, tmp_path, plots):
    history = run(setup, tmp_path, "--heads", "16", "--eliminate_every", "5", "--eval_tasks", "QNLI")
    assert [r["epoch"] for r in history] == [1, 2], f"train_mml.main: expected 2 epoch records, got {history}"
    for name in ("best.pt", "last.pt", "metrics.jsonl", "heads.png", "cross_dataset.json"):
        assert (tmp_path / name).is_file(), f"train_mml.main did not write {name}"
    records = lines(tmp_path / "metrics.jsonl")
    assert [r["epoch"] for r in records] == [1, 2] and all(0 <= r["accuracy"] <= 1 for r in records), records


def test_similarity_task_reports_f1_and_accuracy(setup, tmp_path):
    """STS-B* trains as a binary classifier and is scored with F1 + accuracy, like MRPC."""
    history = run(setup, tmp_path, "--heads", "4", "--epochs", "1", "--eval_tasks", "MRPC", task="STS-B*", method="mv")
    assert {"f1", "accuracy"} <= set(history[0]), f"STS-B* record lacks f1/accuracy: {history[0]}"
    cross = json.loads((tmp_path / "cross_dataset.json").read_text())["results"]["MRPC"]
    assert set(cross) == {"train", "dev"} and cross["dev"]["n"] == 24, cross


def test_regression_task_reports_pearson_and_spearman(setup, tmp_path):
    """STS-B (K = 1): squared-error heads, Eq. 5 averages values, scored by Pearson + Spearman."""
    history = run(setup, tmp_path, "--heads", "3", "--epochs", "1", task="STS-B", method="mml")
    assert {"pearson", "spearman"} <= set(history[0]), f"STS-B record lacks pearson/spearman: {history[0]}"
    assert all(-1 <= history[0][m] <= 1 for m in ("pearson", "spearman")), history[0]


def test_frequent_elimination_logs_events_and_shrinks_beta(setup, tmp_path):
    M = 32
    run(setup, tmp_path, "--heads", str(M), "--eliminate_every", "3", "--min_bandwidth", "0.001")
    events = lines(tmp_path / "eliminations.jsonl")
    assert events, "train_mml.main: --eliminate_every 3 with 32 heads logged no elimination event"
    after = [e["active_after"] for e in events]
    assert after == sorted(after, reverse=True) and after[0] < M, f"Σβ after events should shrink: {after}"
    for e in events:
        assert e["step"] % 3 == 0 and e["kept"] and e["eliminated"], e
        assert max(e["kept_moving_avg"]) <= min(e["eliminated_moving_avg"]) + 1e-9, "kept heads must have the lowest averages"
    active = torch.load(tmp_path / "last.pt", weights_only=True)["model"]["heads.active"]
    assert int(active.sum()) == after[-1] < M, f"checkpointed β has {int(active.sum())} active heads, events say {after[-1]}"


def test_method_bert_equals_hand_written_single_head_finetune(setup, tmp_path):
    """Oracle (b): encoder + dropout 0.1 on the pooled vector + nn.Linear(D, K) + F.cross_entropy
    (BertForSequenceClassification's head), trained by a plain loop with the same seed, batch
    stream and AdamW(weight_decay=0), ends at the same weights."""
    glue, model_dir = setup
    run(setup, tmp_path, method="bert")
    got = torch.load(tmp_path / "last.pt", weights_only=True)["model"]

    seed_everything(3)
    tok = Tokenizer.from_pretrained(model_dir)
    train = TaskData(read_glue(glue, "RTE", "train"), tok, 128)
    encoder = BertModel.from_pretrained(model_dir)
    D = encoder.config.hidden_size
    linear = nn.Linear(D, 2)
    opt = AdamW(list(encoder.parameters()) + list(linear.parameters()), lr=1e-3, weight_decay=0.0)
    stream = BatchStream(train, 4, 3)
    for _ in range(2 * 6):   # 2 epochs of 24 / 4 batches
        batch = to_device(stream.next(), "cpu")
        d = encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])["pooler_output"]  # (B, D)
        d = dropout(d, 0.1)                                     # BERT's classifier dropout, same RNG stream
        F.cross_entropy(linear(d), batch["labels"]).backward()
        opt.step()
        opt.zero_grad()
    for name, value in encoder.state_dict().items():
        torch.testing.assert_close(got[f"encoder.{name}"], value, atol=1e-5, rtol=1e-4,
                                   msg=lambda m: f"train_mml --method bert: encoder.{name} differs from the plain loop\n{m}")
    torch.testing.assert_close(got["heads.weight"][0], linear.weight.detach(), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(got["heads.bias"][0], linear.bias.detach(), atol=1e-5, rtol=1e-4)


def test_resume_after_interrupt_equals_uninterrupted_run(setup, tmp_path, monkeypatch):
    extra = ("--heads", "16", "--eliminate_every", "4", "--min_bandwidth", "0.001")
    full = run(setup, tmp_path / "full", *extra)
    with monkeypatch.context() as m:   # epoch 2, step 3 (6 train calls + 1 dev-eval call per epoch): a real Ctrl-C
        signal_on_call(m, train_mml, "to_device", 10)
        with pytest.raises(SystemExit) as e:
            run(setup, tmp_path / "cut", *extra)
    assert e.value.code == 130
    resumed = run(setup, tmp_path / "cut", *extra, "--resume", str(tmp_path / "cut" / "interrupted.pt"))
    drop = ("elapsed_s", "train_examples_per_s")   # wall-clock figures
    strip = [{k: v for k, v in r.items() if k not in drop} for r in resumed]
    want = [{k: v for k, v in r.items() if k not in drop} for r in full]
    assert strip == want, f"train_mml resume: records {strip} differ from the uninterrupted run's {want}"
    a = torch.load(tmp_path / "full" / "last.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "cut" / "last.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a), "train_mml resume: final weights/buffers differ"
    assert (tmp_path / "full" / "eliminations.jsonl").read_text() == (tmp_path / "cut" / "eliminations.jsonl").read_text()


def test_cross_dataset_json_has_expected_keys_and_scores_in_unit_interval(setup, tmp_path):
    run(setup, tmp_path, "--heads", "4", "--epochs", "1", "--eval_tasks", "QNLI,MNLI", method="ensemble")
    report = json.loads((tmp_path / "cross_dataset.json").read_text())
    assert report["train_task"] == "RTE" and report["method"] == "ensemble"
    res = report["results"]
    assert set(res) == {"QNLI", "MNLI"} and set(res["QNLI"]) == {"train", "dev"}, res
    assert "skipped" in res["MNLI"]["train"], f"MNLI has no train file here: expected a skip note, got {res['MNLI']}"
    for task, split in (("QNLI", "train"), ("QNLI", "dev"), ("MNLI", "dev")):
        scores = res[task][split]
        assert set(scores) == {"accuracy", "f1", "n"} and scores["n"] == 24, scores
        assert all(0.0 <= scores[m] <= 1.0 for m in ("accuracy", "f1")), scores


def test_study_writes_tables_for_one_task_two_methods_one_seed(setup, tmp_path):
    from bench import mml_study
    glue, model = setup
    out = tmp_path / "study"
    argv = ["--tasks", "RTE", "--methods", "bert,mml4", "--seeds", "1", "--model", str(model), "--epochs", "1",
            "--glue_dir", str(glue), "--out_dir", str(out), "--batch_size", "8", "--device", "cpu", "--amp", "off"]
    tables = mml_study.main(argv)
    for name in ("table1.md", "table1.json", "cross_dataset.md", "cross_dataset.json", "performance_profile.png"):
        assert (out / name).is_file(), f"bench.mml_study did not write {name}"
    assert set(tables["table1"]["scores"]) == {"bert", "mml4"} and tables["table1"]["metric"] == {"RTE": "accuracy"}, tables["table1"]
    assert tables["table1"]["mml_heads"]["mml4"]["RTE"]["mean"] == 4, "Table 1's MML #heads row: 4 heads, no elimination in 3 steps"
    assert "MML-4 #heads" in (out / "table1.md").read_text(), "table1.md lacks the MML #heads row"
    nli = tables["cross"]["nli"]
    assert nli["datasets"] == ["MNLI", "QNLI", "RTE"], f"the diagonal (RTE) and the hold-outs: {nli['datasets']}"
    rows = {(r["method"], r["train_task"]): r for r in nli["rows"]}
    assert set(rows[("bert", "RTE")]["accuracy"]["RTE"]) == {"train", "dev"}, "diagonal cell: in-dataset train/dev accuracy"
    assert "train" not in rows[("mml4", "RTE")]["accuracy"]["MNLI"], "MNLI has no train file in the fixture"
    assert rows[("mml4", "RTE")]["improvement_pct"]["dev"] is not None and "mml4" in nli["impr"], nli
    assert len(tables["errors"]) == 3, f"hold-out experiments: QNLI train, QNLI dev, MNLI dev; got {tables['errors']}"
    mtime = (out / "RTE" / "bert" / "seed1" / "metrics.jsonl").stat().st_mtime
    mml_study.main(argv + ["--results_dir", str(tmp_path / "kept")])   # finished runs are skipped, not retrained
    assert (out / "RTE" / "bert" / "seed1" / "metrics.jsonl").stat().st_mtime == mtime
    # a later session without the run folders (not committed): the kept records stand, nothing is retrained
    later = dict(zip(argv[::2], argv[1::2])) | {"--out_dir": str(tmp_path / "later"), "--results_dir": str(tmp_path / "kept")}
    import train_mml
    trained = []
    real = train_mml.main
    train_mml.main = lambda a: trained.append(a) or real(a)
    try:
        again = mml_study.main([x for kv in later.items() for x in kv])
    finally:
        train_mml.main = real
    assert not trained, f"bench.mml_study --results_dir: runs kept there were trained again: {trained}"
    assert again["table1"] == tables["table1"], "the table from the kept records must equal the first one"


def test_non_finite_loss_is_reported_and_never_written_into_weights(setup, tmp_path, monkeypatch, capsys):
    from minbert.methods.mml import MultiverseHeads
    real, calls = MultiverseHeads.multiverse_loss, {"n": 0}

    def nan_on_third(self):
        calls["n"] += 1
        return real(self) * (float("nan") if calls["n"] == 3 else 1.0)

    monkeypatch.setattr(MultiverseHeads, "multiverse_loss", nan_on_third)
    run(setup, tmp_path, "--heads", "4", "--epochs", "1", method="mv")
    assert "non-finite loss at epoch 1 step 2" in capsys.readouterr().out, "train_mml.main must report a non-finite loss and its step"
    state = torch.load(tmp_path / "last.pt", weights_only=True)["model"]
    bad = [k for k, v in state.items() if v.is_floating_point() and not torch.isfinite(v).all()]
    assert not bad, f"a NaN loss reached the weights: {bad[:3]}"


def test_fp16_with_grad_scaler_and_bf16_keep_weights_finite(setup, tmp_path, monkeypatch):
    # a CPU refuses --amp fp16 (minbert.core.device.resolve_amp): forced here, to run the GradScaler path on any machine
    monkeypatch.setattr("minbert.core.device.resolve_amp", lambda amp, device: (amp, "forced for the test"))
    for amp in ("fp16", "bf16"):
        run(setup, tmp_path / amp, "--heads", "4", "--epochs", "1", "--amp", amp)
        state = torch.load(tmp_path / amp / "last.pt", weights_only=True)
        bad = [k for k, v in state["model"].items() if v.is_floating_point() and not torch.isfinite(v).all()]
        assert not bad, f"--amp {amp}: non-finite weights {bad[:3]}"
        assert ("scale" in state["scaler"]) == (amp == "fp16"), "only --amp fp16 uses (and checkpoints) a GradScaler"


def test_best_checkpoint_is_chosen_by_the_paper_metric(setup, tmp_path, monkeypatch):
    """MRPC is reported by accuracy in the paper (GLUE's headline is F1). Scores faked per epoch:
    F1 peaks at epoch 1, accuracy at epoch 2, so best.pt must hold epoch 2's scores."""
    fake = iter([{"f1": 0.9, "accuracy": 0.6}, {"f1": 0.7, "accuracy": 0.8}])
    monkeypatch.setattr(train_mml, "score", lambda task, out, gold: next(fake))
    run(setup, tmp_path, task="MRPC", method="bert")
    best = torch.load(tmp_path / "best.pt", weights_only=True)["scores"]
    assert best == {"f1": 0.7, "accuracy": 0.8}, f"train_mml.main: best.pt must follow minbert.methods.mml_protocol.PAPER_METRIC['MRPC'] = accuracy, got {best}"


@pytest.mark.parametrize("task", ["MNLI", "MRPC", "CoLA", "STS-B"])
def test_score_reports_glues_metrics_of_the_argmax_class(task):
    """train_mml.score: the predicted class of each example is the argmax over its K probabilities (dim -1),
    STS-B's prediction is the value itself. Oracle (b): scikit-learn's accuracy_score / f1_score /
    matthews_corrcoef and scipy's pearsonr / spearmanr on the same predictions."""
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef
    g = torch.Generator().manual_seed(4)
    N, K = 60, {"MNLI": 3, "MRPC": 2, "CoLA": 2, "STS-B": 1}[task]
    if K == 1:
        out, gold = torch.rand(N, generator=g) * 5, torch.rand(N, generator=g) * 5
        pred = out.double().numpy()
    else:
        out = torch.rand(N, K, generator=g).softmax(-1)          # (N, K) probabilities
        gold = torch.randint(0, K, (N,), generator=g)
        pred = out.numpy().argmax(-1)
    oracle = {"accuracy": lambda: accuracy_score(gold, pred), "f1": lambda: f1_score(gold, pred),
              "matthews": lambda: matthews_corrcoef(gold, pred),
              "pearson": lambda: pearsonr(pred, gold.double().numpy())[0],
              "spearman": lambda: spearmanr(pred, gold.double().numpy())[0]}
    got = train_mml.score(task, out, gold)
    for metric, value in got.items():
        assert abs(value - oracle[metric]()) < 1e-6, (
            f"train_mml.score({task!r}): {metric} {value:.6f}, expected {oracle[metric]():.6f} from the argmax over "
            "the classes (dim -1) of each example")
