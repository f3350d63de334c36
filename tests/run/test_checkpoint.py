"""minbert/run/checkpoint.py: one resumable state, loaded without running code.

Oracles: torch's own weights-only unpickler (what a safe load accepts), and round trips: every
random stream and counter a TrainState saves comes back equal (numpy's RNG keys included, which
are stored as a tensor because weights-only loading refuses numpy arrays).
"""

import json
import random
from argparse import Namespace

import numpy as np
import pytest
import torch

from minbert.run import checkpoint
from minbert.core.errors import UserError


class Evil:
    """Any pickled class: unpickling it could run code (its __reduce__ could name os.system)."""


def test_a_checkpoint_holding_a_pickled_object_is_refused_with_a_message(tmp_path):
    path = tmp_path / "shared.pt"
    torch.save({"model": {"w": torch.ones(2)}, "payload": Evil()}, path)
    with pytest.raises(UserError) as e:
        checkpoint.load(path)
    assert "pickled" in str(e.value) and str(path) in str(e.value), \
        f"checkpoint.load must refuse a pickled object and say so, naming the file; got: {e.value}"


def test_train_state_round_trip_restores_counters_rng_and_parts(tmp_path):
    args = Namespace(epochs=3, out_dir=str(tmp_path), resume=str(tmp_path / "last.pt"), lr=0.1, eval_tasks=["QNLI"])
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(4, 3)).sum().backward()
    optimizer.step()
    state = checkpoint.TrainState(args, {"loss": 0.0, "n": 0}, model=model, optimizer=optimizer, scaler=None)
    state.epoch, state.step, state.best, state.history = 2, 5, 0.75, [{"epoch": 1, "overall": 0.75}]
    state.running, state.extra = {"loss": 1.5, "n": 3}, {"trace": [(1, 4)]}
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    checkpoint.save(tmp_path / "last.pt", state.state_dict())
    want = (random.random(), np.random.rand(), torch.rand(1).item())   # the draws right after the save

    fresh_model = torch.nn.Linear(3, 2)
    fresh_opt = torch.optim.SGD(fresh_model.parameters(), lr=0.1, momentum=0.9)
    fresh = checkpoint.TrainState(args, {"loss": 0.0, "n": 0}, model=fresh_model, optimizer=fresh_opt, scaler=None)
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    fresh.load_state_dict(checkpoint.load(tmp_path / "last.pt"))
    got = (random.random(), np.random.rand(), torch.rand(1).item())
    assert got == want, f"TrainState must restore the python, numpy and torch RNGs: draws {got}, expected {want}"
    assert (fresh.epoch, fresh.step, fresh.best, fresh.history) == (2, 5, 0.75, [{"epoch": 1, "overall": 0.75}])
    assert fresh.running == {"loss": 1.5, "n": 3}
    for a, b in zip(model.state_dict().values(), fresh_model.state_dict().values()):
        assert torch.equal(a, b), "TrainState must restore the model's weights"
    momentum = [s["momentum_buffer"] for s in fresh_opt.state_dict()["state"].values()]
    assert momentum and all(torch.isfinite(m).all() for m in momentum), "TrainState must restore the optimizer state"
    assert json.loads(torch.load(tmp_path / "last.pt", weights_only=True)["args"])["eval_tasks"] == ["QNLI"], \
        "the flags are stored as JSON"


def test_resume_with_other_method_flags_is_refused_with_the_difference(tmp_path):
    saved = Namespace(resume=None, out_dir="a", lr=0.1, smart=0.0)
    torch.save({"model": {}, "optimizer": {}, "args": json.dumps(vars(saved))}, tmp_path / "last.pt")
    now = Namespace(resume=str(tmp_path / "last.pt"), out_dir="b", lr=0.1, smart=1.0, predict_only=False)
    with pytest.raises(UserError) as e:
        checkpoint.load_for_resume(now, "train_multitask.py")
    assert "--smart: checkpoint 0.0, this command 1.0" in str(e.value), f"the message must show the flag diff: {e.value}"
    now.smart = 0.0   # --out_dir says where the run is, not what it trains: it may differ
    assert checkpoint.load_for_resume(now, "train_multitask.py")["model"] == {}


def test_best_pt_cannot_continue_training(tmp_path):
    torch.save({"model": {}, "args": "{}"}, tmp_path / "best.pt")
    args = Namespace(resume=str(tmp_path / "best.pt"), predict_only=False)
    with pytest.raises(UserError, match="holds only a model's weights"):
        checkpoint.load_for_resume(args, "train_multitask.py")
