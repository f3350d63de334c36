"""The student copy's own tests run under the grader's fence (fence.preview, which the copy's tests/conftest.py puts
on): a fence refusal shows before the due date, in the grader's words, and the copy with every block holding the
reference passes its own tests under it.

Oracles: the grader's own line for the same submission (graded with the gate switched off, so that the fence is
what refuses); the copy's tests themselves (torch's SDPA and AdamW, Hugging Face's BERT, scikit-learn's MeanShift)
on the reference, which they pass without the fence.
"""

import os
import subprocess
import sys
import textwrap

import pytest
from classroom_helpers import ROOT, first_failure, grade, student, submission, with_block, without_gate  # noqa: F401

from minbert.classroom import assignments as C, autograder, gate, submission as S


def copy_tests(folder, *files):
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files], cwd=folder,
                          capture_output=True, text=True, timeout=1200, env={**os.environ, "OMP_NUM_THREADS": "1"})


@pytest.mark.slow
def test_a_fence_refusal_shows_in_the_copys_own_tests_in_the_graders_words(student, tmp_path,  # noqa: F811
                                                                           without_gate):
    """Before, the copy's tests ran the block unfenced: SDPA in the attention block passed them, and the refusal
    showed only in the grade."""
    sub = with_block(student, tmp_path, "attention.py", "attention",
                     "y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)")
    line = first_failure(grade(sub, {"attention"}, salt=3), "attention")
    assert line.startswith("called torch.nn.functional.scaled_dot_product_attention at minbert/bert/attention.py:"), \
        line
    r = copy_tests(sub, "tests/bert/test_attention.py")
    assert r.returncode == 1 and line in r.stdout, f"the copy's tests did not say {line!r}:\n{r.stdout[-3000:]}"


@pytest.mark.slow
def test_the_copy_with_the_reference_in_every_block_passes_its_own_tests_under_the_fence(student, tmp_path):
    """The fence checks only the blocks' lines, each against its own assignment's lists: given code the tests reach
    (the fast attention, dropout while training, the heads of another assignment) is the grader's to check as its
    cases run it. Filled with the reference, every assignment's own tests pass."""
    sub = submission(student, tmp_path)
    for rel in S.graded_files(set(C.BY_KEY)):
        nth = {}
        for key, body, _ in gate.split(C.omit((ROOT / rel).read_text(), rel, set(C.BY_KEY)))[1]:
            autograder._replace_block(sub / rel, key, textwrap.dedent(body).strip("\n"), nth=nth.get(key, 0))
            nth[key] = nth.get(key, 0) + 1
    assert "fence.preview" in (sub / "tests" / "conftest.py").read_text()
    r = copy_tests(sub, *sorted({t for a in C.ASSIGNMENTS for t in a.tests}))
    assert r.returncode == 0, r.stdout[-3000:]
