"""Smoke, resume and safety tests of train_multitask.py on tiny self-made data.

A 2-layer, 32-wide random BERT (BertConfig.tiny) with MiniLM's vocabulary keeps each run to a
few seconds. Oracles: (c) properties — every output is written in the handout's format;
resume after an interrupt equals an uninterrupted run (same seed); --option pretrain leaves
the encoder untouched; a non-finite loss never reaches the weights.
"""

import json
import math

import pytest
import torch

import train_multitask
from minbert.methods import gradvac, r3f as r3f_module, smart as smart_module
from minbert.run import checkpoint
from minbert.tasks import multitask
from minbert.bert.model import BertModel
from minbert.methods.pals import PALs
from conftest import save_tiny_model, signal_on_call, write_task_files  # noqa: F401  (re-exported)


real_load = checkpoint.load


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("multitask")
    data, model = root / "data", root / "model"
    data.mkdir()
    write_task_files(data)
    return data, save_tiny_model(model)


def run(setup, out, *extra):
    data, model = setup
    args = ["--model", str(model), "--data_dir", str(data), "--out_dir", str(out / "run"),
            "--epochs", "2", "--batch_size", "4", "--lr", "1e-3", "--hidden_dropout_prob", "0.1", "--seed", "3",
            "--device", "cpu", "--amp", "off",   # the same numbers on every CPU (auto would pick bf16 on some)
            "--keep_resume_state"]   # these tests read last.pt of finished runs
    for task in ("sst", "para", "sts"):
        for split in ("dev", "test"):
            args += [f"--{task}_{split}_out", str(out / "predictions" / f"{task}-{split}-output.csv")]
    return train_multitask.main(args + list(extra))


def cut_and_resume(setup, tmp_path, monkeypatch, n, *flags):
    """(uninterrupted history, resumed history): one run straight through, one stopped by a real Ctrl-C in its
    n-th task loss and resumed from interrupted.pt."""
    full = run(setup, tmp_path / "full", *flags)
    with monkeypatch.context() as m:
        signal_on_call(m, train_multitask, "task_loss", n)
        with pytest.raises(SystemExit) as stopped:
            run(setup, tmp_path / "cut", *flags)
    assert stopped.value.code == 130, f"a Ctrl-C must exit with status 130, got {stopped.value.code}"
    return full, run(setup, tmp_path / "cut", *flags, "--resume", str(tmp_path / "cut" / "run" / "interrupted.pt"))


def test_smoke_run_trains_evaluates_and_writes_every_output(setup, tmp_path, plots):
    history = run(setup, tmp_path)
    assert [r["epoch"] for r in history] == [1, 2], f"train_multitask.main: expected 2 epoch records, got {history}"
    for name in ("best.pt", "last.pt", "metrics.jsonl", "curves.png"):
        assert (tmp_path / "run" / name).is_file(), f"train_multitask.main did not write {name}"
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["epoch"] for x in lines] == [1, 2]
    headers = {"sst": "Predicted_Sentiment", "para": "Predicted_Is_Paraphrase", "sts": "Predicted_Similiary"}   # the handout's spelling
    prefix = {"sst": "s", "para": "q", "sts": "t"}
    for task, title in headers.items():
        for split in ("dev", "test"):
            text = (tmp_path / "predictions" / f"{task}-{split}-output.csv").read_text()
            rows = text.splitlines()
            assert rows[0] == f"id \t {title} ", f"{task}-{split}: header {rows[0]!r} is not the handout's"
            assert len(rows) == 25, f"{task}-{split}: expected 24 predictions, got {len(rows) - 1}"
            ident, value = rows[1].split(" , ")
            assert ident.startswith(prefix[task]) and value.endswith(" "), f"{task}-{split}: bad row {rows[1]!r}"
            if task != "sts":
                assert value.strip() in {str(v) for v in range(5)}, f"{task}: prediction {value!r} is not an int label"


@pytest.mark.parametrize("fast", ["auto", "off"])   # the other resume tests run with the default, auto
def test_resume_after_interrupt_equals_uninterrupted_run(setup, tmp_path, monkeypatch, fast):
    full, resumed = cut_and_resume(setup, tmp_path, monkeypatch, 20, "--fast_paths", fast)   # Ctrl-C in task loss 20
    keys = ("sst_acc", "para_acc", "sts_pearson", "overall")
    got, want = [resumed[-1][k] for k in keys], [full[-1][k] for k in keys]
    assert got == want, (f"train_multitask resume (--fast_paths {fast}): final dev scores {got} differ from the "
                         f"uninterrupted run's {want}")


def test_pretrain_option_leaves_encoder_weights_untouched(setup, tmp_path):
    run(setup, tmp_path, "--option", "pretrain", "--epochs", "1")
    trained = checkpoint.load(tmp_path / "run" / "best.pt")["model"]
    original = BertModel.from_pretrained(setup[1]).state_dict()
    for name, value in original.items():
        assert torch.equal(trained[f"encoder.{name}"], value), f"--option pretrain changed encoder weight {name}"
    torch.manual_seed(3)   # train_multitask seeds with --seed 3 before building the heads
    fresh = multitask.MultitaskBert(BertModel.from_pretrained(setup[1])).heads.state_dict()
    changed = [k for k, v in fresh.items() if not torch.equal(v, trained[f"heads.{k}"])]
    assert changed, "--option pretrain must still train the heads"


def test_freeze_word_embeddings_keeps_the_vocabulary_rows_and_trains_the_rest(setup, tmp_path):
    run(setup, tmp_path, "--freeze_word_embeddings", "--epochs", "1")
    ck = checkpoint.load(tmp_path / "run" / "last.pt")
    trained, original = ck["model"], BertModel.from_pretrained(setup[1]).state_dict()
    name = "embeddings.word_embedding.weight"
    assert torch.equal(trained[f"encoder.{name}"], original[name]), \
        "--freeze_word_embeddings changed the word embeddings (weight decay or a step reached them)"
    moved = [k for k in original if k != name and not torch.equal(trained[f"encoder.{k}"], original[k])]
    assert len(moved) == len(original) - 1, f"every other encoder weight must train; unchanged: " \
        f"{sorted(set(original) - set(moved) - {name})}"
    sizes = {tuple(s["exp_avg"].shape) for s in ck["optimizer"]["state"].values()}
    assert tuple(original[name].shape) not in sizes, "AdamW must hold no moments for the frozen word embeddings"


def test_fp16_with_grad_scaler_and_bf16_keep_weights_finite(setup, tmp_path, monkeypatch):
    # a CPU refuses --amp fp16 (minbert.core.device.resolve_amp): forced here, to run the GradScaler path on any machine
    monkeypatch.setattr("minbert.core.device.resolve_amp", lambda amp, device: (amp, "forced for the test"))
    for amp in ("fp16", "bf16"):
        run(setup, tmp_path / amp, "--amp", amp, "--epochs", "1")
        state = torch.load(tmp_path / amp / "run" / "last.pt", weights_only=True)
        bad = [k for k, v in state["model"].items() if v.is_floating_point() and not torch.isfinite(v).all()]
        assert not bad, f"--amp {amp}: non-finite weights {bad[:3]}"
        if amp == "fp16":
            assert "scale" in state["scaler"], "--amp fp16 must use (and checkpoint) a GradScaler"


def test_non_finite_loss_is_reported_and_never_written_into_weights(setup, tmp_path, monkeypatch, capsys):
    real_loss = multitask.task_loss
    calls = {"n": 0}

    def nan_on_third(*a):
        calls["n"] += 1
        loss = real_loss(*a)
        return loss * math.nan if calls["n"] == 3 else loss

    monkeypatch.setattr(train_multitask, "task_loss", nan_on_third)
    run(setup, tmp_path, "--epochs", "1")
    out = capsys.readouterr()
    assert "non-finite para loss" in out.out + out.err or "non-finite sst loss" in out.out + out.err or \
        "non-finite sts loss" in out.out + out.err, "train_multitask.main must report a non-finite loss with its task and step"
    state = torch.load(tmp_path / "run" / "last.pt", weights_only=True)["model"]
    assert all(torch.isfinite(v).all() for v in state.values() if v.is_floating_point()), "a NaN loss reached the weights"


METHOD_FLAGS = {
    "pals_zero_init": ["--pals", "--pals_init", "zero", "--pals_size", "16", "--pals_heads", "2"],
    "pals_frozen_bert": ["--pals", "--option", "pretrain", "--pals_size", "16", "--pals_heads", "2"],
    "bi_encoder_heads_mnr": ["--para_head", "cosine", "--sts_head", "siamese", "--mnr", "0.1"],
    "heterogeneous_scaled": ["--heterogeneous", "--scale_losses", "--schedule", "sqrt"],
    "head_pretraining": ["--head_pretrain_epochs", "1"],
    "smart": ["--smart", "1"],
    "smart_reference": ["--smart", "1", "--smart_mode", "reference"],
    "r3f": ["--r3f", "1"],
    "r4f": ["--r3f", "1", "--r4f"],
    "pcgrad_fp16": ["--surgery", "pcgrad", "--amp", "fp16"],
    "gradvac_bf16": ["--surgery", "gradvac", "--amp", "bf16"],
    "grad_compromise": ["--grad_compromise", "5"],
    "grad_compromise_layers_normalized": ["--grad_compromise", "4", "--gradvac_groups", "layer", "--grad_compromise_normalize"],
    "benton_dot_mnr_first_half": ["--sts_head", "cosine", "--mnr", "1", "--mnr_score", "dot", "--mnr_schedule", "first_half", "--epochs", "2"],
    "dot_and_concat_heads": ["--sts_head", "dot", "--para_head", "concat", "--head", "mlp", "--head_layers", "2"],
    "cross_tanh_relu_mlp": ["--sts_head", "cross_tanh", "--head", "mlp", "--head_activation", "relu", "--smart", "1"],
    "uniform_extra_sst_patience": ["--schedule", "uniform", "--extra_sst_pass", "--head_pretrain_epochs", "3",
                                   "--head_pretrain_patience", "1"],
}


@pytest.mark.parametrize("method", sorted(METHOD_FLAGS))
def test_each_method_flag_trains_and_keeps_weights_finite(setup, tmp_path, method, monkeypatch):
    # a CPU refuses --amp fp16 (minbert.core.device.resolve_amp): forced here, to run the GradScaler path on any machine
    monkeypatch.setattr("minbert.core.device.resolve_amp", lambda amp, device: (amp, "forced for the test"))
    history = run(setup, tmp_path, "--epochs", "1", *METHOD_FLAGS[method])
    assert 0.0 <= history[-1]["overall"] <= 1.0, f"{method}: overall score {history[-1]['overall']} out of range"
    state = torch.load(tmp_path / "run" / "last.pt", weights_only=True)
    bad = [k for k, v in state["model"].items() if v.is_floating_point() and not torch.isfinite(v).all()]
    assert not bad, f"train_multitask {METHOD_FLAGS[method]}: non-finite weights {bad[:3]}"


def test_pals_with_frozen_bert_train_only_pals_and_heads(setup, tmp_path):
    run(setup, tmp_path, "--epochs", "1", *METHOD_FLAGS["pals_frozen_bert"])
    trained = checkpoint.load(tmp_path / "run" / "best.pt")["model"]
    original = BertModel.from_pretrained(setup[1]).state_dict()
    changed = [n for n, v in original.items() if not torch.equal(trained[f"encoder.{n}"], v)]
    assert not changed, f"--pals --option pretrain changed BERT weights {changed[:3]}"
    assert any(k.startswith("pals.") for k in trained), "PAL parameters missing from the checkpoint"


def test_resume_keeps_smart_teacher_and_gradvac_state(setup, tmp_path, monkeypatch):
    saved = []
    monkeypatch.setattr(checkpoint, "load", lambda path, *a: saved.append(real_load(path, *a)) or saved[-1])
    full, resumed = cut_and_resume(setup, tmp_path, monkeypatch, 25, "--smart", "1", "--surgery", "gradvac")
    ck = next(c for c in saved if "optimizer" in c)   # the interrupted.pt the resume read
    assert ck["smart"] is not None and ck["surgery"] is not None, "interrupted.pt must hold the SMART teacher and GradVac state"
    keys = ("sst_acc", "para_acc", "sts_pearson", "overall")
    assert [resumed[-1][k] for k in keys] == [full[-1][k] for k in keys], "resume with --smart --surgery gradvac diverged"


def test_head_lr_applies_to_heads_and_pals_only(setup, tmp_path):
    run(setup, tmp_path, "--epochs", "1", "--head_lr", "0.02", "--pals", "--pals_size", "16", "--pals_heads", "2")
    groups = torch.load(tmp_path / "run" / "last.pt", weights_only=True)["optimizer"]["param_groups"]
    lrs = sorted({g["initial_lr"] for g in groups})
    assert lrs == [1e-3, 0.02], f"train_multitask --head_lr: expected encoder groups at --lr 1e-3 and heads/PALs at 0.02, got {lrs}"
    n_new = sum(len(g["params"]) for g in groups if g["initial_lr"] == 0.02)
    encoder = BertModel.from_pretrained(setup[1])
    model = multitask.MultitaskBert(encoder, pals=PALs(encoder.config, multitask.TASKS, 16, 2))
    expected = len(list(model.heads.parameters())) + len(list(model.pals.parameters()))
    assert n_new == expected, f"--head_lr covers {n_new} tensors, expected the {expected} of heads + PALs"


def record_task_losses(monkeypatch):
    """Replace train_multitask.task_loss with a wrapper that logs (task, loss value) of every batch."""
    log, real_loss = [], multitask.task_loss

    def logged(task, out, labels):
        loss = real_loss(task, out, labels)
        log.append((task, loss.item()))
        return loss

    monkeypatch.setattr(train_multitask, "task_loss", logged)
    return log


def test_grad_compromise_divides_task_sums_by_dataset_size_to_the_beta(setup, tmp_path, monkeypatch):
    """Oracle: hand computation of Alg. 1's last line (Pritsky et al.). 24 examples per task; epoch 1 of 2:
    β = 0.2, epoch 2: β = 1. Each task's loss handed to GradVac must be (sum of its batch losses) / 24^β,
    not / (number of its batches)^β."""
    log = record_task_losses(monkeypatch)
    seen = []

    class RecordingGradVac(gradvac.GradVac):
        def accumulate(self, losses, scaler=None):
            seen.append(([None if l is None else l.item() for l in losses], list(log)))
            log.clear()
            return super().accumulate(losses, scaler)

    monkeypatch.setattr(gradvac, "GradVac", RecordingGradVac)
    run(setup, tmp_path, "--grad_compromise", "5", "--steps_per_epoch", "3")
    assert len(seen) == 6, f"expected 3 updates x 2 epochs, got {len(seen)}"
    for step, (got, batches) in enumerate(seen):
        beta = 0.2 if step < 3 else 1.0
        assert len(batches) == 5 and {t for t, _ in batches} == {"sst", "para", "sts"}, \
            f"update {step}: expected 5 batches covering every task, got {batches}"
        for k, task in enumerate(("sst", "para", "sts")):
            want = sum(v for t, v in batches if t == task) / 24 ** beta
            assert got[k] == pytest.approx(want, rel=1e-5), (
                f"train_multitask --grad_compromise, update {step}, {task}: GradVac got {got[k]}, expected "
                f"sum of batch losses / S_data^β = {want} (minbert.methods.gradient_compromise.GradientCompromise.scale)")


def test_extra_sst_pass_adds_one_sst_pass_per_epoch(setup, tmp_path, monkeypatch):
    """Oracle: hand count (Song/Hu/Pan's extra SST run per epoch). 3 x 24 examples, batch 4, round robin:
    18 steps = 6 batches per task; then ceil(24 / 4) = 6 SST-only steps."""
    log = record_task_losses(monkeypatch)
    run(setup, tmp_path, "--epochs", "1", "--schedule", "round_robin", "--extra_sst_pass")
    tasks = [t for t, _ in log]
    counts = {t: tasks.count(t) for t in ("sst", "para", "sts")}
    assert counts == {"sst": 12, "para": 6, "sts": 6}, f"train_multitask --extra_sst_pass: batches per task {counts}"
    assert tasks[-6:] == ["sst"] * 6, "the extra SST pass comes at the end of the epoch"


def test_paper_hyperparameter_flags_reach_smart_r3f_and_gradvac(setup, tmp_path, monkeypatch):
    """Oracle: definition (CLI flags map 1:1 to constructor fields). Song/Hu/Pan's weak SMART setting
    (ε = σ = 1e-6, μ = 0.02), R3F with normal noise, GradVac with per-layer groups: the 2-layer model has 5
    groups (embeddings, 2 layers, pooler, heads), so the saved targets are (K, K, G) = (3, 3, 5)."""
    built = {}

    class RecordingSMART(smart_module.SMART):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            built["SMART"] = self

    class RecordingR3F(r3f_module.R3F):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            built["R3F"] = self

    monkeypatch.setattr(smart_module, "SMART", RecordingSMART)
    monkeypatch.setattr(r3f_module, "R3F", RecordingR3F)
    run(setup, tmp_path, "--epochs", "1", "--steps_per_epoch", "2", "--smart", "1", "--smart_epsilon", "1e-6",
        "--smart_sigma", "1e-6", "--smart_mu", "0.02", "--smart_eta", "1e-4", "--smart_steps", "2",
        "--r3f", "0.5", "--r3f_epsilon", "2e-5", "--r3f_noise", "normal",
        "--surgery", "gradvac", "--gradvac_groups", "layer", "--gradvac_beta", "0.05")
    smart, r3f = built["SMART"], built["R3F"]
    assert (smart.epsilon, smart.sigma, smart.mu, smart.eta, smart.steps) == (1e-6, 1e-6, 0.02, 1e-4, 2), \
        "train_multitask: --smart_epsilon/--smart_sigma/--smart_mu/--smart_eta/--smart_steps must reach minbert.methods.smart.SMART"
    assert (r3f.lambda_, r3f.epsilon, r3f.noise) == (0.5, 2e-5, "normal"), "--r3f_epsilon/--r3f_noise must reach minbert.methods.r3f.R3F"
    surgery = torch.load(tmp_path / "run" / "last.pt", weights_only=True)["surgery"]
    assert tuple(surgery["targets"].shape) == (3, 3, 5), \
        f"--gradvac_groups layer: expected GradVac targets (3, 3, 5), got {tuple(surgery['targets'].shape)}"


def test_resume_with_grad_compromise_replays_the_schedule(setup, tmp_path, monkeypatch):
    """Oracle: determinism. Gradient Compromise draws each update's tasks from the task sampler's
    checkpointed numpy Generator, so a run interrupted mid-epoch and resumed ends with the same dev
    scores as an uninterrupted one. 24 examples per task, batch 4, 5 batches per update: 4 updates
    (20 batch losses) per epoch; the interrupt comes at loss 27, inside epoch 2."""
    full, resumed = cut_and_resume(setup, tmp_path, monkeypatch, 27, "--grad_compromise", "5", "--gradvac_groups", "layer")
    keys = ("sst_acc", "para_acc", "sts_pearson", "overall")
    assert [resumed[-1][k] for k in keys] == [full[-1][k] for k in keys], \
        "train_multitask --grad_compromise: resume diverged (minbert.methods.gradient_compromise.GradientCompromise.tasks must use the sampler's rng)"


@pytest.mark.parametrize("accum", [3])
def test_grad_accum_step_uses_the_mean_of_the_micro_batch_gradients(setup, tmp_path, monkeypatch, accum):
    """--grad_accum k: the optimizer steps on (1/k)·Σ_m ∇loss_m, the gradient of the mean loss over the k
    micro-batches, so an lr tuned at one batch size carries over. Oracle: each micro-batch's gradient taken
    with torch.autograd.grad at the moment train_multitask.py computes that loss (dropout off)."""
    grads, seen = {}, []

    class Recording(train_multitask.AdamW):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            grads["params"] = [p for g in self.param_groups for p in g["params"]]

        def step(self, closure=None):
            if "at_step" not in grads:
                grads["at_step"] = [None if p.grad is None else p.grad.clone() for p in grads["params"]]
                grads["micro"] = list(seen)
            return super().step(closure)

    real_loss = train_multitask.task_loss

    def recording_loss(task, out, labels):
        loss = real_loss(task, out, labels)
        if "at_step" not in grads:
            seen.append(torch.autograd.grad(loss, grads["params"], retain_graph=True, allow_unused=True))
        return loss

    monkeypatch.setattr(train_multitask, "AdamW", Recording)
    monkeypatch.setattr(train_multitask, "task_loss", recording_loss)
    run(setup, tmp_path, "--epochs", "1", "--grad_accum", str(accum), "--hidden_dropout_prob", "0",
        "--limit", "16")
    assert len(grads["micro"]) == accum, f"expected {accum} micro-batch losses before the first step, saw {len(grads['micro'])}"
    for n, (p, got) in enumerate(zip(grads["params"], grads["at_step"])):
        parts = [m[n] for m in grads["micro"] if m[n] is not None]
        if not parts:
            continue
        want = torch.stack(parts).sum(0) / accum
        diff = (got - want).abs().max().item()
        assert diff <= 1e-6 + 1e-4 * want.abs().max().item(), (
            f"train_multitask.py --grad_accum {accum}: parameter {n}'s gradient at the first step is off the mean of "
            f"the {accum} micro-batch gradients by {diff:.3g} (ratio {got.norm() / want.norm():.3f}; {accum}.000 means "
            f"the losses were summed, not divided by --grad_accum)")


@pytest.mark.parametrize("epochs, select", [("1", "best"), ("2", "last")])
def test_the_dev_set_is_scored_once_at_the_end_of_a_run(setup, tmp_path, monkeypatch, epochs, select):
    """The kept model's dev predictions come from its own evaluation (a 1-epoch run scored the dev set twice: once to
    evaluate, once to predict). Oracle: --predict_only on the finished run, which loads model/ and scores the dev set
    afresh, writes the same dev files byte for byte; and the run scores dev once per epoch, never again."""
    scored, real = [], train_multitask.run_heads

    def counted(model, splits, *a, **k):
        scored.append(k.get("desc", "eval"))
        return real(model, splits, *a, **k)

    monkeypatch.setattr(train_multitask, "run_heads", counted)
    run(setup, tmp_path, "--epochs", epochs, "--select_epoch", select)
    assert scored == ["eval"] * int(epochs) + ["predict test"], \
        f"{epochs} epoch(s), --select_epoch {select}: the run scored {scored}; dev once per epoch, then test only"
    run(setup, tmp_path / "again", "--epochs", epochs, "--select_epoch", select, "--predict_only", "--resume",
        str(tmp_path / "run"))
    for task in ("sst", "para", "sts"):
        name = f"{task}-dev-output.csv"
        ours, afresh = (folder / "predictions" / name for folder in (tmp_path, tmp_path / "again"))
        assert ours.read_bytes() == afresh.read_bytes(), \
            f"{name}: the run's dev predictions differ from the finished model's, scored afresh by --predict_only"
