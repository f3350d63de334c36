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
from minbert.tasks.data import Example, TaskData
from minbert.tasks.multitask import MultitaskBert


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
