"""Grades bench/study_confirmation.py --collect's commands.txt: the record of every command the plan ran, over
all sittings. Each sitting's --results_dir holds only its own commands, so a collection that wrote them alone would
drop the earlier sittings' lines from the committed file."""

from bench.study_confirmation import merged_history

EARLIER = "# sitting 1: A\nrun baseline seed9\n# sitting 1: B\nrun mnr seed9\n"


def test_collect_keeps_the_earlier_sittings_and_adds_each_new_line_once():
    this_sitting = ["# sitting 2: A\nrun baseline seed10\n", "# sitting 2: B\nrun mnr seed10\nrun mnr seed9\n"]
    got = merged_history(EARLIER, this_sitting)
    assert got.startswith(EARLIER), "study_confirmation.merged_history: the committed sittings' lines must stay first"
    assert got.splitlines()[4:] == ["# sitting 2: A", "run baseline seed10", "# sitting 2: B", "run mnr seed10"], \
        f"study_confirmation.merged_history: each new sitting's lines, once, after the committed ones; got {got!r}"


def test_collecting_the_same_sitting_twice_adds_nothing():
    assert merged_history(EARLIER, [EARLIER]) == EARLIER, \
        "study_confirmation.merged_history: lines already committed must not be written again"
