"""Instructor-only reference checks moved out of tests/methods/test_mml.py: they compare the graded function with an
independent written-out reference (minbert/classroom/references.py). The student copy leaves this file out;
tests/methods/test_mml.py keeps its property and stored-case checks.
"""

from test_mml import MOD, close, make_heads

from minbert.classroom.references import brute_force_mv


def test_multiverse_loss_matches_brute_force_loop():
    heads = make_heads(D=6, K=3, M=5, seed=2)
    close(heads.multiverse_loss(), brute_force_mv(heads.weight.detach(), heads.active), f"{MOD}.multiverse_loss")
    heads.active[[1, 3]] = False
    close(heads.multiverse_loss(), brute_force_mv(heads.weight.detach(), heads.active), f"{MOD}.multiverse_loss (masked)")
