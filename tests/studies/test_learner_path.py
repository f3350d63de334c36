"""bench/learner_path.py counts the checkout's own files on a step: a file belongs to the checkout by its path's
parts, not by a string prefix (a sibling folder whose name starts with the checkout's name is another checkout).
Oracle: hand-made paths."""

from pathlib import Path

from bench.learner_path import in_checkout


def test_a_sibling_folder_starting_with_the_checkouts_name_is_not_the_checkout():
    repo = Path("/home/me/minbert")
    assert in_checkout("/home/me/minbert/minbert/adamw.py", repo), "a file inside the checkout is the checkout's"
    assert not in_checkout("/home/me/minbert-old/minbert/adamw.py", repo), \
        "bench/learner_path.py: /home/me/minbert-old is a sibling of /home/me/minbert, not inside it"
    assert not in_checkout("/home/me/minbert", repo), "the checkout's folder itself is no file of it"
