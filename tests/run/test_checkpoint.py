"""minbert/run/checkpoint.py: one resumable state, loaded without running code.

Oracles: torch's own weights-only unpickler (what a safe load accepts), and round trips: every
random stream and counter a resume checkpoint holds comes back equal (numpy's RNG keys included, which
are stored as a tensor because weights-only loading refuses numpy arrays); (a) stored reference layouts:
dicts written by hand in the key layouts of earlier minbert versions (the loop's keys at the top level, the log's
times under "log") still restore, into the "loop" entry the scripts read.
"""

import json
import math
import random
from argparse import Namespace

import numpy as np
import pytest
import torch

from minbert.run import checkpoint
from minbert.core.errors import UserError
from test_trained_run import runs  # noqa: F401  (fixture: three finished tiny runs)


class Evil:
    """Any pickled class: unpickling it could run code (its __reduce__ could name os.system)."""


def test_a_checkpoint_holding_a_pickled_object_is_refused_with_a_message(tmp_path):
    path = tmp_path / "shared.pt"
    torch.save({"model": {"w": torch.ones(2)}, "payload": Evil()}, path)
    with pytest.raises(UserError) as e:
        checkpoint.load(path)
    assert "pickled" in str(e.value) and str(path) in str(e.value), \
        f"checkpoint.load must refuse a pickled object and say so, naming the file; got: {e.value}"


def test_resume_state_round_trip_restores_counters_rng_and_objects(tmp_path):
    args = Namespace(epochs=3, out_dir=str(tmp_path), resume=str(tmp_path / "last.pt"), lr=0.1, eval_tasks=["QNLI"])
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(4, 3)).sum().backward()
    optimizer.step()
    loop = {"epoch": 2, "step": 5, "best": 0.75, "history": [{"epoch": 1, "overall": 0.75}],
            "sums": {"loss": [1.5, 3]}, "trace": [(1, 4)]}
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    checkpoint.save(tmp_path / "last.pt", checkpoint.state({"model": model, "optimizer": optimizer, "smart": None},
                                                           loop, args))
    want = (random.random(), np.random.rand(), torch.rand(1).item())   # the draws right after the save

    fresh_model = torch.nn.Linear(3, 2)
    fresh_opt = torch.optim.SGD(fresh_model.parameters(), lr=0.1, momentum=0.9)
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    got_loop = checkpoint.restore(checkpoint.load(tmp_path / "last.pt"),
                                  {"model": fresh_model, "optimizer": fresh_opt, "smart": None})
    got = (random.random(), np.random.rand(), torch.rand(1).item())
    assert got == want, f"checkpoint.restore must restore the python, numpy and torch RNGs: draws {got}, expected {want}"
    assert got_loop == loop, f"checkpoint.restore must return the loop's locals as saved: {got_loop}"
    for a, b in zip(model.state_dict().values(), fresh_model.state_dict().values()):
        assert torch.equal(a, b), "checkpoint.restore must restore the model's weights"
    momentum = [s["momentum_buffer"] for s in fresh_opt.state_dict()["state"].values()]
    assert momentum and all(torch.isfinite(m).all() for m in momentum), "checkpoint.restore must restore the optimizer"
    stored = torch.load(tmp_path / "last.pt", weights_only=True)
    assert set(stored) == {"model", "optimizer", "smart", "rng", "loop", "args"}, \
        f"the key layout on disk: one key per object, the RNGs, the loop, the flags; got {sorted(stored)}"
    assert json.loads(stored["args"])["eval_tasks"] == ["QNLI"], "the flags are stored as JSON"


def earlier_rng():
    np_state = np.random.get_state()
    return {"python": random.getstate(),
            "numpy": (np_state[0], {"ndarray": torch.from_numpy(np_state[1].copy()), "dtype": "uint32"}, *np_state[2:]),
            "torch": torch.get_rng_state()}


def test_checkpoint_in_an_earlier_layout_still_restores(tmp_path):
    """A last.pt as minbert wrote it before the loop's state was one "loop" entry, by hand: one key per part (None
    for a method that is off, a list for per-task streams), 'rng', the six loop keys at the top level, the log's
    times and its sums at the last record under 'log', and 'args'."""
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(4, 3)).sum().backward()
    optimizer.step()
    stream = torch.nn.Linear(1, 1)   # stands in for one batch stream per task: anything with a state_dict
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    old = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": None, "scaler": None,
           "smart": None, "streams": [stream.state_dict(), stream.state_dict()], "rng": earlier_rng(),
           "epoch": 2, "step": 3, "best": 0.5, "history": [{"epoch": 1, "overall": 0.5}],
           "running": {"sst": [1.0, 2]}, "extra": {},
           "log": {"elapsed_s": 12.5, "epoch_s": 3.0, "epoch_examples": 24, "last": {"sst": [0.25, 1]}, "step": 21},
           "args": json.dumps({"lr": 0.1})}
    want = (random.random(), np.random.rand(), torch.rand(1).item())
    torch.save(old, tmp_path / "last.pt")

    fresh_model, streams = torch.nn.Linear(3, 2), [torch.nn.Linear(1, 1), torch.nn.Linear(1, 1)]
    fresh_opt = torch.optim.SGD(fresh_model.parameters(), lr=0.1, momentum=0.9)
    objects = {"model": fresh_model, "optimizer": fresh_opt, "scheduler": None, "scaler": None, "smart": None,
               "streams": streams}
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    args = Namespace(resume=str(tmp_path / "last.pt"), predict_only=False, lr=0.1)
    loop = checkpoint.restore(checkpoint.load_for_resume(args, "train_multitask.py"), objects)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == want, "the old layout's RNG states must restore"
    assert loop == {"epoch": 2, "step": 3, "best": 0.5, "history": [{"epoch": 1, "overall": 0.5}], "elapsed_s": 12.5,
                    "sums": {"sst": [1.0, 2]}, "seen": [3.0, 24], "window": {"sst": [0.75, 1]}}, loop
    assert list(loop) == ["epoch", "step", "best", "history", "elapsed_s", "sums", "seen", "window"], \
        "the loop's keys in the order the scripts unpack them"
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), fresh_model.state_dict().values()))
    assert all(torch.equal(s.weight, stream.weight) for s in streams), "per-task parts restore from a list"


def test_an_mml_checkpoint_with_the_earlier_loss_sums_resumes_in_the_one_shape():
    """train_mml.py kept {"task": sum, "mv": sum, "n": count} before both scripts kept {name: [sum, count]}: a run
    interrupted under the earlier code resumes with the same means (not a TypeError at its first step), and its
    head trace and eliminations come last, where train_mml.py unpacks them."""
    loop = checkpoint.earlier_loop({"epoch": 2, "step": 7, "best": 0.5, "history": [],
                                    "extra": {"trace": [(1, 4)], "events": []},
                                    "running": {"task": 3.5, "mv": 1.25, "n": 5}})
    assert loop["sums"] == {"task": [3.5, 5], "mv": [1.25, 5]}, \
        f"checkpoint.earlier_loop: an earlier MML checkpoint's sums should read as [sum, count]: {loop['sums']}"
    assert list(loop)[-2:] == ["trace", "events"] and loop["trace"] == [(1, 4)], loop


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


@pytest.mark.parametrize("write, why", [
    (lambda p: p.write_text("not a checkpoint"), "not a file that torch.save wrote"),
    (lambda p: (torch.save({"model": {"w": torch.ones(1000)}}, p), p.write_bytes(p.read_bytes()[:700])),
     "cut short or damaged"),
])
def test_an_unreadable_checkpoint_is_one_line_without_torch_advice(tmp_path, write, why):
    """Oracle: property. torch.load's own text for these files runs to 7 lines and advises weights_only=False
    (which lets a file run code); the message is one line that names the file and what is wrong."""
    path = tmp_path / "last.pt"
    write(path)
    with pytest.raises(checkpoint.UnreadableCheckpoint) as e:
        checkpoint.load(path)
    message = str(e.value)
    assert why in message and str(path) in message, f"checkpoint.load: expected {why!r} and the path in {message!r}"
    assert len(message.splitlines()) == 1 and "weights_only" not in message, \
        f"checkpoint.load: one line, no torch advice, expected; got:\n{message}"
    assert e.value.path == path, "UnreadableCheckpoint.path must name the file (the run folder reads it)"


def test_resume_note_is_a_plain_line_never_best_minus_infinity():
    """Oracle: property. Before any epoch ends there is no best score to show ("best -inf" was printed)."""
    loop = {"epoch": 1, "step": 86, "best": -math.inf, "history": []}
    assert checkpoint.resume_note(loop) == "resuming at epoch 1, step 86; no epoch finished yet"
    loop = {"epoch": 3, "step": 0, "best": 0.61234, "history": [{"epoch": 1, "overall": 0.5},
                                                                 {"epoch": 2, "overall": 0.61234}]}
    note = checkpoint.resume_note(loop)
    assert note == "resuming at epoch 3, step 0; 2 epoch(s) done, best dev score so far 0.6123", note


# ---------------------------------------------------------------------- one copy of the weights in a finished run


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished tiny train_multitask.py run of one epoch that keeps last.pt: best and last are the same model."""
    import train_multitask
    from conftest import save_tiny_model, write_task_files
    root = tmp_path_factory.mktemp("one_copy")
    (root / "data").mkdir()
    write_task_files(root / "data")
    train_multitask.main(["--model", str(save_tiny_model(root / "model")), "--data_dir", str(root / "data"),
                          "--out_dir", str(root / "run"), "--epochs", "1", "--batch_size", "4", "--amp", "off",
                          "--seed", "3", "--keep_resume_state"])
    return root / "run"


def test_a_finished_run_keeps_its_weights_once_and_best_pt_still_loads_them(finished):
    """best.pt names model/ instead of holding a second copy; checkpoint.load gives back the very tensors the
    training loop saved (last.pt's: with one epoch the best model is the last)."""
    stored = torch.load(finished / "best.pt", weights_only=True)
    assert stored["model"] == {} and stored["weights_in"] == "model", \
        f"a finished run's best.pt should name model/ instead of copying its weights; it holds {sorted(stored)}"
    assert (finished / "best.pt").stat().st_size < 100_000, \
        f"best.pt is {(finished / 'best.pt').stat().st_size:,} bytes: it still holds the weights"
    trained = torch.load(finished / "last.pt", weights_only=True)["model"]
    got = checkpoint.load(finished / "best.pt")["model"]
    assert set(got) == set(trained), f"best.pt's weights via model/: keys differ: {sorted(set(got) ^ set(trained))[:4]}"
    for k, v in trained.items():
        assert torch.equal(got[k], v), f"checkpoint.load(best.pt)['model'][{k}] differs from the trained weights"


def test_best_pt_keeps_its_copy_when_model_dir_holds_other_weights(tmp_path):
    """share_weights compares every tensor: a model/ written from other weights (--select_epoch last) is no copy."""
    from conftest import save_tiny_model
    from minbert.bert.model import BertModel
    encoder = BertModel.from_pretrained(save_tiny_model(tmp_path / "base"))
    model = torch.nn.ModuleDict({"encoder": encoder, "heads": torch.nn.Linear(encoder.config.hidden_size, 2)})
    checkpoint.save_weights(tmp_path / "best.pt", model, Namespace(lr=0.1), scores={"overall": 0.5})
    with torch.no_grad():
        encoder.layers[0].out_dense.bias.add_(1e-3)           # training went on after best.pt
    from minbert.core.export import export
    export(tmp_path / "model", encoder, None, {"heads": model["heads"]})
    assert not checkpoint.share_weights(tmp_path / "best.pt", tmp_path / "model"), \
        "share_weights must refuse a model/ whose weights differ from best.pt's"
    assert "model" in torch.load(tmp_path / "best.pt", weights_only=True), "best.pt lost its weights"

    with torch.no_grad():
        encoder.layers[0].out_dense.bias.sub_(1e-3)
    export(tmp_path / "model", encoder, None, {"heads": model["heads"]})
    saved = torch.load(tmp_path / "best.pt", weights_only=True)["model"]
    assert checkpoint.share_weights(tmp_path / "best.pt", tmp_path / "model"), "the same weights: one copy"
    checkpoint.own_weights(tmp_path / "best.pt")   # before model/ is rewritten from other weights
    back = torch.load(tmp_path / "best.pt", weights_only=True)
    assert "weights_in" not in back and all(torch.equal(back["model"][k], v) for k, v in saved.items()), \
        "own_weights must put best.pt's own weights back in it"


def test_best_pt_without_its_model_dir_is_one_line(finished, tmp_path):
    import shutil
    shutil.copy(finished / "best.pt", tmp_path / "best.pt")   # copied alone, without model/
    with pytest.raises(UserError) as e:
        checkpoint.load(tmp_path / "best.pt")
    assert str(tmp_path / "model") in str(e.value) and "\n" not in str(e.value), \
        f"checkpoint.load: a best.pt without its model/ should say where the weights are, in one line: {e.value}"


def test_both_scripts_finished_runs_keep_one_copy(runs):
    """train_multitask.py (pooler and mean pooling) and train_mml.py (MML heads, some eliminated)."""
    for kind in ("pooler", "bi", "mml"):
        best = getattr(runs, kind) / "best.pt"
        stored = torch.load(best, weights_only=True)
        kept = sorted(stored.get("model", {}))
        assert stored.get("weights_in") == "model" and all(k.startswith("eliminator.") for k in kept), \
            f"{best}: a finished run's best.pt should name model/ and keep only what it lacks, it keeps {kept[:4]}"
        got = checkpoint.load(best)["model"]
        assert any(k.startswith("encoder.") for k in got) and set(kept) <= set(got), \
            f"{best}: checkpoint.load should give the encoder from model/ and best.pt's own tensors"
