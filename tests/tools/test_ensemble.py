"""Grades minbert/tools/ensemble.py, the command `python -m minbert ensemble`.

Oracle: an ensemble of ONE real run of train_multitask.py reproduces that run's six prediction files byte for byte,
with every method and weighting; the Quora stand-in keeps its name; nothing is replaced without --overwrite.
The method (weighted average and vote, the selections) is graded by tests/methods/test_ensemble_method.py and
tests/methods/test_ensemble_combine.py.
"""

import pytest

from minbert.tools import ensemble
from minbert.tasks.data import STAND_IN_PARA_TEST

from conftest import tiny_run_inputs


def test_ensemble_of_one_run_reproduces_its_prediction_files_byte_for_byte(tmp_path):
    from test_train_multitask import run
    data, model = tiny_run_inputs(tmp_path)
    run((data, model), tmp_path, "--epochs", "1", "--limit", "12")
    for method, weights in (("average", "greedy"), ("average", "ranked"), ("average", "ranked_overall"), ("vote", "uniform"),
                            ("average", "3")):
        out = tmp_path / f"ens-{method}-{weights}"
        ensemble.main([str(tmp_path / "run"), "--method", method, "--weights", weights, "--out_dir", str(out)])
        for task in ("sst", "para", "sts"):
            for split in ("dev", "test"):
                name = f"{task}-{split}-output.csv"
                mine, theirs = (out / "predictions" / name).read_bytes(), (tmp_path / "predictions" / name).read_bytes()
                assert mine == theirs, f"minbert.tools.ensemble.main ({method}, {weights}): {name} of a one-run ensemble differs from the run's own file"
        assert "ensemble" in (out / "members.md").read_text()


def test_ensemble_of_runs_on_the_quora_stand_in_names_its_file_so(tmp_path):
    """train_multitask.py names the Quora test predictions of the shipped dev sample (read without labels) as a
    stand-in; an ensemble of such runs must not write them under the handout's submission name."""
    from test_train_multitask import run
    data, model = tiny_run_inputs(tmp_path)
    run((data, model), tmp_path, "--epochs", "1", "--limit", "12", "--para_test", str(data / "quora-dev.csv"))
    out = tmp_path / "ens"
    ensemble.main([str(tmp_path / "run"), "--out_dir", str(out)])
    written = {p.name for p in (out / "predictions").iterdir()}
    assert STAND_IN_PARA_TEST in written and "para-test-output.csv" not in written, \
        f"minbert.tools.ensemble: Quora test predictions of the dev sample must be named {STAND_IN_PARA_TEST}, got {sorted(written)}"


def test_ensemble_never_replaces_prediction_files_without_overwrite(tmp_path):
    """`ensemble RUN --out_dir FOLDER` wrote FOLDER/predictions/*.csv over whatever was there: a run's own files
    (here the tiny run's, which sit in tmp_path/predictions) were silently replaced."""
    import hashlib
    from minbert.core.errors import UserError
    from test_train_multitask import run
    data, model = tiny_run_inputs(tmp_path)
    run((data, model), tmp_path, "--epochs", "1", "--limit", "12")
    digest = lambda: {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (tmp_path / "predictions").iterdir()}
    before = digest()
    with pytest.raises(UserError, match="already exists.*--overwrite"):
        ensemble.main([str(tmp_path / "run"), "--weights", "uniform", "--out_dir", str(tmp_path)])
    assert digest() == before, "minbert.tools.ensemble.main: a refused ensemble changed the prediction files there"
    ensemble.main([str(tmp_path / "run"), "--weights", "uniform", "--out_dir", str(tmp_path), "--overwrite"])
    assert (tmp_path / "members.md").is_file(), "minbert.tools.ensemble.main --overwrite must write the ensemble"
