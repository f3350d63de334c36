"""The honest corpus (tests/classroom/honest/): correct answers written from the student copy's hints, docstrings and
the papers' equations, never from the reference blocks, in the styles students write. A variant's header names its
style classes (classroom_helpers.CLASSES: type hints naming torch classes, losses in module form, members of listed
classes, numpy's everyday functions, AdamW's `_foreach_` form, the given code's idioms, an import at the file's top);
a variant without one writes the other styles (loops, einsum, in place, HF style, helpers, asserts).

Each variant is correct with both walls off: its outputs against the reference's, run with no gate, no fence and no
intake (classroom_helpers.walls_off, the grader's own tolerance). With both walls on, none is refused by the intake
or the gate, and each scores its assignment's full points. Oracles: the reference's outputs, the full points.
"""

from pathlib import Path

import pytest
from classroom_helpers import (CLASSES, ROOT, first_failure, grade, honest_corpus, lay, rounds, scores,  # noqa: F401
                               student, submission, walls_off)

from minbert.classroom import assignments as classroom, submission as intake
from minbert.classroom.assignments import package_file

STYLES = ["other", *CLASSES]


def primary(v) -> str:
    """The class a variant is checked under: its first, or "other"."""
    return (v.classes or ("other",))[0]


def test_the_corpus_covers_every_assignment_and_every_style_class():
    corpus = honest_corpus()
    per = {k: sum(1 for v in corpus if v.key == k) for k in classroom.BY_KEY}
    per_class = {c: sum(1 for v in corpus if c in (v.classes or ("other",))) for c in STYLES}
    assert len(corpus) >= 100 and min(per.values()) >= 4, f"the corpus covers too little: {per}"
    assert min(per_class.values()) >= 2, f"a style class with fewer than 2 variants: {per_class}"


@pytest.mark.parametrize("style", STYLES)
def test_no_honest_variant_is_refused_by_the_intake_or_the_gate(style, tmp_path):
    """Each variant's graded file as handed in (its `top` lines included) through the grader's intake and gate
    (submission.lay_over, which grading runs before any box), one call per round of variants."""
    refused = []
    for i, group in enumerate(rounds([v for v in honest_corpus() if primary(v) == style])):
        sub, keys = tmp_path / f"sub{i}", {v.key for v in group}
        for rel in intake.graded_files(keys):
            (sub / rel).parent.mkdir(parents=True, exist_ok=True)
            (sub / rel).write_text((ROOT / rel).read_text())
        for v in group:
            lay(sub / package_file(Path(v.file).name), v)
        template = intake.write_template(tmp_path / f"template{i}", set(classroom.BY_KEY))
        problems, gated = intake.lay_over(sub, template, keys)
        refused += [f"{v.name}: {line}" for v in group for line in problems[v.key] + sorted(gated[v.key].values())]
    assert not refused, f"{len(refused)} honest variant(s) refused:\n" + "\n".join(refused)


@pytest.mark.slow
def test_every_honest_variant_is_correct_with_both_walls_off(tmp_path):
    """The corpus itself: each variant's outputs equal the reference's on the cases of 3 seeds, no wall up."""
    wrong = {name: why for name, why in walls_off(honest_corpus(), tmp_path).items() if why}
    assert not wrong, f"{len(wrong)} variant(s) of the corpus are wrong, whatever the walls:\n" + "\n".join(
        f"{name}: {why}" for name, why in wrong.items())


@pytest.mark.slow
@pytest.mark.parametrize("group", ["other styles", "style classes"])
def test_the_honest_corpus_scores_full_points_with_both_walls_on(group, student, tmp_path):
    """Graded as the course grades (intake, gate, box, fence), one grade per round of variants of different
    assignments: every variant scores its assignment's full points."""
    corpus = [v for v in honest_corpus() if (primary(v) == "other") == (group == "other styles")]
    lost = []
    for i, variants in enumerate(rounds(corpus)):
        keys = {v.key for v in variants}
        restore = sorted({Path(rel).name for rel in intake.graded_files(keys)})   # every other block: the reference
        sub = submission(student, tmp_path / str(i), restore=restore)
        for v in variants:
            lay(sub / package_file(Path(v.file).name), v)
        got = grade(sub, keys, salt=11)
        for v in variants:
            missing = classroom.BY_KEY[v.key].points - scores(got)[v.key]
            lost += [f"{v.name}: {missing:g} points lost: {first_failure(got, v.key)}"] if missing else []
    assert not lost, f"{len(lost)} honest variant(s) lost points:\n" + "\n".join(lost)
