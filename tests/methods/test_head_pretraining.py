"""Tests for minbert/methods/head_pretraining.py: per-task head pretraining with early stopping (patience).

Oracles: property with a scripted dev-score sequence (the dev evaluation is replaced by a list of
numbers, so the stopping epoch and the kept state follow by hand), on a tiny random BERT.
Run: python -m pytest -q tests/methods/test_head_pretraining.py   (offline, CPU, a few seconds)
"""

import copy

import pytest
import torch

from minbert.methods import head_pretraining
from minbert.bert.config import BertConfig
from minbert.bert.model import BertModel
from minbert.bert.tokenizer import Tokenizer
from minbert.tasks.data import Example
from minbert.tasks.sampling import TaskData
from minbert.tasks.multitask import MultitaskBert
from conftest import flags_parser


def setup(seed=0):
    torch.manual_seed(seed)
    model = MultitaskBert(BertModel(BertConfig.tiny()))
    data = TaskData([Example(f"s{i}", f"good bad film {i % 4}", None, i % 5) for i in range(8)], Tokenizer.from_pretrained("minilm-l6"), 16)
    return model, {"sst": data}


@pytest.mark.parametrize("patience, scores, epochs_run, best_epoch", [
    (3, [0.1, 0.3, 0.2, 0.25, 0.29, 0.9, 0.9], 5, 2),   # 3 stale epochs after epoch 2: stop at 5, keep 2
    (3, [0.1, 0.3, 0.3, 0.3, 0.3, 0.9], 5, 2),          # a tie is not an improvement
    (2, [0.1, 0.2, 0.1, 0.3, 0.2, 0.1], 6, 4),          # the count restarts at each new best
    (0, [0.5, 0.1, 0.1, 0.1, 0.1, 0.1], 6, 1),          # patience 0: all epochs
])
def test_patience_stops_after_stale_epochs_and_keeps_the_best_head(monkeypatch, patience, scores, epochs_run, best_epoch):
    """Oracle: hand-traced sequences (Pritsky et al.: 25 epochs, patience 3)."""
    model, train = setup()
    seen, states = iter(scores), []

    def scripted(results, splits):
        states.append(copy.deepcopy(model.heads["sst"].state_dict()))   # the head as evaluated
        return {"sst_acc": next(seen)}

    monkeypatch.setattr(head_pretraining, "task_scores", scripted)
    monkeypatch.setattr(head_pretraining, "run_heads", lambda *args: None)   # the scores are scripted
    best = head_pretraining.pretrain_heads(model, train, train, epochs=len(scores), batch_size=4, lr=1e-2,
                                           device=torch.device("cpu"), amp="off", seed=0, patience=patience)
    assert len(states) == epochs_run, (f"minbert.methods.head_pretraining.pretrain_heads(patience={patience}): ran {len(states)} "
                                       f"epochs on scores {scores}, expected {epochs_run}")
    assert best["sst"] == max(scores[:epochs_run])
    for name, value in model.heads["sst"].state_dict().items():
        assert torch.equal(value, states[best_epoch - 1][name]), f"pretrain_heads must restore the head of epoch {best_epoch}"


# ---------------------------------------------------------------------------- the training itself, against torch
def sst_data(n, offset=0):
    tok = Tokenizer.from_pretrained("minilm-l6")
    words = ["good", "bad", "film", "plot", "dull", "fun", "great", "awful"]
    return TaskData([Example(f"s{i}", " ".join(words[(i * k + offset) % 8] for k in range(1, 2 + i % 5)), None, (i + offset) % 5)
                     for i in range(n)], tok, 16)


def dropout_free(seed=0):
    """A tiny float64 model without dropout: one step depends only on the batch, not on an RNG."""
    torch.manual_seed(seed)
    config = BertConfig.tiny(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return MultitaskBert(BertModel(config), dropout=0.0).double()


def test_head_training_matches_torch_adamw_on_the_same_batches(monkeypatch):
    """Oracle: torch.optim.AdamW (Loshchilov & Hutter; lr, no weight decay, eps 1e-8) on the head alone, fed the
    batches of TaskData.batches(shuffle=True) with the generator seeded seed·1000 + epoch, cross-entropy computed
    here with F.cross_entropy (in fp32, as every task loss is). Dropout is off, so each step is a function of the batch alone: a wrong lr, a weight
    decay, another batch order (no shuffle, another seed) or a moved encoder shows up in the head's weights."""
    import torch.nn.functional as F
    model, train = dropout_free(), {"sst": sst_data(12)}
    reference = copy.deepcopy(model)
    encoder_before = copy.deepcopy(model.encoder.state_dict())
    epochs, lr, seed, batch_size = 3, 0.05, 3, 4
    rising = iter([0.1, 0.2, 0.3])   # every epoch is a new best: the last state is kept
    monkeypatch.setattr(head_pretraining, "task_scores", lambda results, splits: {"sst_acc": next(rising)})
    monkeypatch.setattr(head_pretraining, "run_heads", lambda *args: None)
    head_pretraining.pretrain_heads(model, train, train, epochs=epochs, batch_size=batch_size, lr=lr,
                                    device=torch.device("cpu"), amp="off", seed=seed)
    opt = torch.optim.AdamW(reference.heads["sst"].parameters(), lr=lr, weight_decay=0.0, eps=1e-8)
    for epoch in range(epochs):
        g = torch.Generator().manual_seed(seed * 1000 + epoch)
        for batch in train["sst"].batches(batch_size, shuffle=True, generator=g):
            with torch.no_grad():
                pooled = reference.encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])["pooler_output"]
            F.cross_entropy(reference.heads["sst"](pooled).float(), batch["labels"]).backward()   # losses in fp32
            opt.step()
            opt.zero_grad()
    for name, value in reference.heads["sst"].state_dict().items():
        torch.testing.assert_close(model.heads["sst"].state_dict()[name], value, rtol=1e-7, atol=1e-9,
                                   msg=f"minbert.methods.head_pretraining.pretrain_heads: heads.sst.{name} differs from torch "
                                       "AdamW(lr, weight_decay=0) run on the same shuffled batches (generator seed·1000 + epoch)")
    for name, value in encoder_before.items():
        assert torch.equal(model.encoder.state_dict()[name], value), \
            f"minbert.methods.head_pretraining.pretrain_heads: the encoder must stay frozen, but encoder.{name} moved"


def test_returned_score_is_the_dev_accuracy_of_the_kept_head():
    """Oracle: scikit-learn's accuracy_score of the argmax of the restored head on the dev split (not the train
    split), computed here from the model's logits: the score pretrain_heads returns is that of the head it keeps."""
    from sklearn.metrics import accuracy_score
    model, train, dev = dropout_free(1), {"sst": sst_data(8)}, {"sst": sst_data(11, offset=3)}
    best = head_pretraining.pretrain_heads(model, train, dev, epochs=3, batch_size=4, lr=0.05,
                                           device=torch.device("cpu"), amp="off", seed=0)
    assert model.training, "minbert.methods.head_pretraining.pretrain_heads must leave the model in train mode"
    model.eval()
    batch = next(dev["sst"].batches(64, shuffle=False))
    with torch.no_grad():
        pred = model("sst", batch).argmax(-1)
    expected = accuracy_score(batch["labels"].tolist(), pred.tolist())
    assert best["sst"] == pytest.approx(expected, abs=1e-12), \
        f"minbert.methods.head_pretraining.pretrain_heads: returned dev score {best['sst']}, but the kept head scores {expected} on dev"


def scripted_run(monkeypatch, scores, **kwargs):
    model, train = setup()
    seen, count = iter(scores), []

    def scripted(results, splits):
        count.append(1)
        return {"sst_acc": next(seen)}
    monkeypatch.setattr(head_pretraining, "task_scores", scripted)
    monkeypatch.setattr(head_pretraining, "run_heads", lambda *args: None)
    best = head_pretraining.pretrain_heads(model, train, train, epochs=len(scores), batch_size=4, lr=1e-2,
                                           device=torch.device("cpu"), amp="off", seed=0, **kwargs)
    return best, len(count)


def test_patience_defaults_to_off(monkeypatch):
    """Oracle: the documented default (patience = 0 runs all `epochs` passes)."""
    best, ran = scripted_run(monkeypatch, [0.5, 0.1, 0.1, 0.1])
    assert ran == 4, f"minbert.methods.head_pretraining.pretrain_heads: without patience= every epoch runs; ran {ran} of 4"


def test_a_nan_first_score_counts_as_stale_not_as_a_head_start(monkeypatch):
    """Oracle: hand-traced. A dev Pearson of constant predictions is NaN; NaN > best is False, so it is one stale
    epoch (count 1), and the next real score is the first best: with patience 2 the run goes on past it."""
    best, ran = scripted_run(monkeypatch, [float("nan"), 0.5, 0.4, 0.3, 0.9], patience=2)
    assert (ran, best["sst"]) == (4, 0.5), \
        f"minbert.methods.head_pretraining.pretrain_heads(patience=2), scores nan, .5, .4, .3, .9: expected 4 epochs and " \
        f"best 0.5, got {ran} epochs and best {best['sst']} (the stale count must start at 0)"


def test_progress_lines_name_the_epoch_and_the_stop(monkeypatch, capsys):
    """Oracle: hand-written expected log (epochs are counted from 1, as the user gave --head_pretrain_epochs)."""
    scripted_run(monkeypatch, [0.25, 0.125, 0.5], patience=1)
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["head pretraining sst epoch 1/3: dev 0.2500", "head pretraining sst epoch 2/3: dev 0.1250",
                     "head pretraining sst: no better dev score for 1 epochs, stopping"], \
        f"minbert.methods.head_pretraining.pretrain_heads: progress lines {lines}"


# ---------------------------------------------------------------------------- flags
def parser():
    from minbert.tasks import multitask
    return flags_parser(multitask, head_pretraining)


def test_flags_defaults_types_and_bounds():
    """Oracle: the flags' contract: off by default, Pritsky et al. §4.4's lr 1e-3, patience off (0); 0 is a valid
    epoch count and patience, a negative one or a zero lr stops at parse time (exit 2)."""
    args = parser().parse_args([])
    assert (args.head_pretrain_epochs, args.head_pretrain_patience, args.head_pretrain_lr) == (0, 0, 1e-3), \
        f"minbert.methods.head_pretraining.add_args defaults: {args}"
    args = parser().parse_args(["--head_pretrain_epochs", "25", "--head_pretrain_patience", "3", "--head_pretrain_lr", "0.01"])
    assert (args.head_pretrain_epochs, args.head_pretrain_patience, args.head_pretrain_lr) == (25, 3, 0.01) \
        and isinstance(args.head_pretrain_lr, float), f"minbert.methods.head_pretraining.add_args: flags not parsed as numbers: {args}"
    args = parser().parse_args(["--head_pretrain_epochs", "0", "--head_pretrain_patience", "0"])
    assert (args.head_pretrain_epochs, args.head_pretrain_patience) == (0, 0)
    for bad in (["--head_pretrain_epochs", "-1"], ["--head_pretrain_patience", "-1"], ["--head_pretrain_lr", "0"]):
        with pytest.raises(SystemExit):
            parser().parse_args(bad)


def test_check_args_refuses_head_pretraining_with_option_pretrain(capsys):
    """Oracle: the rule (--option pretrain already trains heads on the frozen encoder)."""
    p = parser()
    for ok in ([], ["--option", "pretrain"], ["--head_pretrain_epochs", "2"], ["--option", "finetune", "--head_pretrain_epochs", "2"]):
        head_pretraining.check_args(p.parse_args(ok), p)
    with pytest.raises(SystemExit):
        head_pretraining.check_args(p.parse_args(["--option", "pretrain", "--head_pretrain_epochs", "2"]), p)
    err = capsys.readouterr().err
    assert ": error: --head_pretrain_epochs trains the heads on the frozen encoder, which is what --option pretrain already does\n" in err, \
        f"minbert.methods.head_pretraining.check_args: the error must say why the flags clash: {err!r}"


def test_from_args_passes_every_flag_and_skips_on_resume_or_zero_epochs(monkeypatch):
    """Oracle: the flag -> argument map written out by hand."""
    import argparse
    calls = []
    monkeypatch.setattr(head_pretraining, "pretrain_heads", lambda *a, **k: calls.append((a, k)) or {"sst": 0.5})
    model, train, dev, device = object(), {"t": 1}, {"d": 2}, torch.device("cpu")
    args = argparse.Namespace(head_pretrain_epochs=7, batch_size=5, head_pretrain_lr=0.02, amp="bf16", seed=11,
                              head_pretrain_patience=3, resume=None)
    assert head_pretraining.from_args(args, model, train, dev, device) == {"sst": 0.5}
    assert calls == [((model, train, dev, 7, 5, 0.02, device, "bf16", 11), {"patience": 3})], \
        f"minbert.methods.head_pretraining.from_args: pretrain_heads called with {calls}"
    for off in ({"head_pretrain_epochs": 0}, {"resume": "runs/x/last.pt"}):
        calls.clear()
        assert head_pretraining.from_args(argparse.Namespace(**{**vars(args), **off}), model, train, dev, device) is None
        assert not calls, f"minbert.methods.head_pretraining.from_args: {off} must not pretrain the heads"
