"""Checks the stored reference tensors of tests/fixtures/ against live Hugging Face `transformers`.

The graders of assignments 1 and 3 compare against tests/fixtures/bert_tiny_reference.npz so that
grading needs no transformers; this test rebuilds every stored tensor with the installed
transformers (tests/fixtures/make_reference.py) so the file can never go stale unnoticed.
Oracle (b), live: HF BertModel. Needs transformers (requirements-dev.txt), like test_model.py.
"""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import make_reference  # noqa: E402  (tests/fixtures is not a package)


@pytest.mark.slow   # rebuilds every reference with transformers: ~5-10 s on 2 cores
def test_stored_references_equal_live_transformers():
    pytest.importorskip("transformers")
    live = make_reference.build()
    with np.load(make_reference.FIXTURE) as stored:
        assert sorted(stored.files) == sorted(live), (
            f"{make_reference.FIXTURE.name}: stored keys differ from make_reference.build(); "
            "regenerate with: python tests/fixtures/make_reference.py")
        for key, value in live.items():
            if key == "config":
                assert str(stored[key]) == str(value), f"{make_reference.FIXTURE.name}: config changed; regenerate"
                continue
            np.testing.assert_allclose(stored[key], value, atol=1e-6, rtol=1e-5, err_msg=(
                f"{make_reference.FIXTURE.name}[{key}] no longer matches transformers "
                "(a new HF version changed BertModel?); check, then regenerate with: "
                "python tests/fixtures/make_reference.py"))
