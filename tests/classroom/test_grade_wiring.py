"""What grade() gives each assignment (minbert/classroom/grade.py): the cases drawn for the submission's seed,
the references computed on them, the template with the submission laid over it (a zip unpacked, a hostile one
refused, a syntax error named for every assignment importing the file), the level and the deadline.

Oracles: (c) properties and hand-worked expectations from docs/classroom.md: the same salt draws the same cases,
a fresh one other cases; the references are the instructor's scenarios run on exactly the cases given; a graded
file the student uploads is laid over the template unchanged; an assignment not handed out keeps its solution.
The box is replaced by a stand-in for grade_assignment (monkeypatch), so no child starts: a few seconds in all
(the template is written and the references computed for real).
"""

import os
import signal
import threading
import zipfile

import pytest

import torch

from minbert.classroom import assignments as C, cleanup, grade as G


# ---------------------------------------------------------------------- grade: what each assignment is given

class Grading:
    """grade() with a stand-in for the box (grade_assignment): records what each assignment is given, and the
    template as it is while the assignment runs."""

    def __init__(self, monkeypatch, level="user+chroot"):
        self.calls, self.trees = [], []
        monkeypatch.setattr(G, "_ISOLATION", (level, "why"))
        monkeypatch.setattr(G, "grade_assignment", self.assignment)
        monkeypatch.setattr(G.box_root, "link_tree", self.link_tree)

    def link_tree(self, root):
        """A stand-in for the hard-link tree (30,000 links): a folder, recorded."""
        os.mkdir(root)
        self.trees.append(root)
        return str(root)

    def assignment(self, a, cases, wants, template, work, problems, timeout, level, secrets, **box):
        files = {str(p.relative_to(template)): p.read_text() for p in (template / "minbert").rglob("*.py")}
        modes = {p.stat().st_mode & 0o777 for p in (template, *template.rglob("*"))}
        self.calls.append(dict(key=a.key, cases=cases, wants=wants, template=template, work=work, problems=problems,
                               timeout=timeout, level=level, secrets=secrets, files=files, modes=modes, box=box,
                               seed=G.seed_of(template, 7)))
        return [{"assignment": a.key, "case": i} for i in range(len(cases))]


def loose(tmp_path, *names):
    """A submission of loose graded files, as Gradescope's upload gives them: the instructor's own (correct) files."""
    sub = tmp_path / "upload"
    sub.mkdir(exist_ok=True)
    for name in names:
        (sub / G.Path(name).name).write_bytes((C.ROOT / "minbert" / name).read_bytes())
    return sub


def as_handed_out(rel):
    """The instructor's file with its solutions, and without the regions the course copy leaves out (AdamW's fused
    step): what the template holds where the instructor's own file was submitted."""
    return C.omit((C.ROOT / rel).read_text(), rel, set(C.BY_KEY))


def stub_of(text, key):
    return any(f"({key})" in m.group(0) for m in [C.STUB_LINE.search(line) for line in text.splitlines()] if m)


def test_grade_gives_each_selected_assignment_its_drawn_cases_references_and_the_laid_over_template(tmp_path, monkeypatch):
    old = G.os.umask(0o077)                 # files private by default: the template's modes are the ones grade set
    try:
        check_one_grade(tmp_path, monkeypatch)
    finally:
        G.os.umask(old)


def check_one_grade(tmp_path, monkeypatch):
    run = Grading(monkeypatch)
    got = G.grade(loose(tmp_path, "bert/attention.py", "adamw.py"), selected=["adamw", "attention"], salt=7,
                  timeout=3.5, workers=0, require_isolation=False)
    assert sorted(c["key"] for c in run.calls) == ["adamw", "attention"]
    assert list(got) == [{"assignment": "attention", "case": i} for i in range(6)] + \
        [{"assignment": "adamw", "case": i} for i in range(8)], "the entries in course order, whatever order was asked"
    assert got.salt == 7 and got.refused == {"attention": [], "adamw": []}
    for c in run.calls:
        drawn = G.CASES.draw(c["key"], c["seed"])
        assert len(c["cases"]) == len(drawn) and all(
            torch.equal(x[k], y[k]) for x, y in zip(c["cases"], drawn) for k in y if isinstance(y[k], torch.Tensor))
        assert len(c["wants"]) == len(c["cases"]) and all(
            torch.equal(w[k], r[k]) for w, case in zip(c["wants"], c["cases"]) for r in [G.scenarios.run(c["key"], case)]
            for k in r), f"{c['key']}: the references are scenarios.run on the same cases"
        assert (c["problems"], c["timeout"], c["level"], c["work"]) == ([], 3.5, "user+chroot",
                                                                      c["template"].parent / "jobs")
        assert c["secrets"] == G.secrets_of(C.ROOT) and c["modes"] == {0o755, 0o644}
        assert c["files"]["minbert/bert/attention.py"] == (C.ROOT / "minbert/bert/attention.py").read_text()
        assert c["files"]["minbert/adamw.py"] == as_handed_out("minbert/adamw.py")
        assert stub_of(c["files"]["minbert/methods/smart.py"], "smart"), "an assignment not graded keeps its stub"


def test_grade_draws_the_same_cases_for_the_same_salt_and_a_fresh_secret_salt_by_default(tmp_path, monkeypatch):
    run = Grading(monkeypatch, level="user+chroot")
    sub = loose(tmp_path, "bert/attention.py")
    first = G.grade(sub, selected=["attention"], salt=7, require_isolation=False)
    second = G.grade(sub, selected=["attention"], salt=7, require_isolation=False)
    fresh = G.grade(sub, selected=["attention"], require_isolation=False)
    assert first.salt == second.salt == 7 and isinstance(fresh.salt, int) and fresh.salt >= 0
    x = [c["cases"][0]["x"] for c in run.calls]
    assert torch.equal(x[0], x[1]) and not torch.equal(x[0], x[2]), "the salt, and only it, changes the cases"


def tensors_of(value, path="case"):
    """Every tensor in a drawn case, with where it sits: (path, tensor) pairs."""
    if torch.is_tensor(value):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from tensors_of(v, f"{path}[{k!r}]")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from tensors_of(v, f"{path}[{i}]")


@pytest.mark.parametrize("key", [a.key for a in C.ASSIGNMENTS])
def test_a_regrade_draws_the_same_weights_whatever_ran_before_it(key):
    """docs/classroom.md: a regrade with the printed salt draws the same cases. The weights too: a module's init
    comes from torch's global generator, which whatever ran before the grade has moved."""
    from minbert.classroom import cases
    draws = []
    for before in (1, 2):
        torch.manual_seed(before)   # another state of the global generator, as another process or run leaves it
        draws.append(list(tensors_of(cases.draw(key, 5))))
    assert [p for p, _ in draws[0]] == [p for p, _ in draws[1]], f"{key}: two draws of seed 5 differ in structure"
    for (path, a), (_, b) in zip(*draws):
        assert torch.equal(a, b), f"minbert/classroom/cases.py, draw({key!r}, 5): {path} differs between two draws " \
                                  "with the same seed (it depends on torch's global generator)"


def test_grade_of_a_hand_out_of_some_assignments_keeps_the_other_solutions_in_the_template(tmp_path, monkeypatch):
    run = Grading(monkeypatch)
    G.grade(loose(tmp_path, "bert/attention.py"), selected=["attention"], handout=["smart"], salt=7,
            require_isolation=False)
    files = run.calls[0]["files"]
    assert stub_of(files["minbert/methods/smart.py"], "smart"), "smart was handed out: the template has its stub"
    assert not stub_of(files["minbert/adamw.py"], "adamw"), "adamw was not handed out: its solution stays"


def test_grade_unpacks_a_zip_and_refuses_a_hostile_one_for_every_assignment(tmp_path, monkeypatch):
    run = Grading(monkeypatch)
    good, bad = tmp_path / "good.zip", tmp_path / "bad.zip"
    with zipfile.ZipFile(good, "w") as z:
        z.write(C.ROOT / "minbert/bert/attention.py", "minbert/bert/attention.py")
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("../escape.py", "x = 1\n")
    G.grade(good, selected=["attention"], salt=7, require_isolation=False)
    assert run.calls[0]["problems"] == [] and \
        run.calls[0]["files"]["minbert/bert/attention.py"] == (C.ROOT / "minbert/bert/attention.py").read_text()
    G.grade(bad, selected=["attention", "adamw"], salt=7, require_isolation=False)
    assert [len(c["problems"]) for c in run.calls[1:]] == [1, 1] and all(
        c["problems"][0].startswith("refused: ") for c in run.calls[1:]), [c["problems"] for c in run.calls[1:]]


def test_grade_reports_a_syntax_error_for_each_assignment_that_imports_the_file(tmp_path, monkeypatch):
    run = Grading(monkeypatch)
    sub = loose(tmp_path, "bert/attention.py", "adamw.py")
    text = (sub / "attention.py").read_text()
    marker = "### BEGIN SOLUTION attention\n"
    line = text[:text.index(marker)].count("\n") + 2                     # the line after the marker
    indent = text[:text.index(marker)].rsplit("\n", 1)[1]
    (sub / "attention.py").write_text(text.replace(marker, marker + indent + "x = (\n", 1))
    G.grade(sub, selected=["attention", "layer", "adamw"], salt=7, require_isolation=False)
    problems = {c["key"]: c["problems"] for c in run.calls}
    assert problems["adamw"] == []
    assert problems["attention"] == problems["layer"] and len(problems["layer"]) == 1, problems
    assert problems["layer"][0].startswith(f"could not run: your minbert/bert/attention.py has a syntax error at line {line} "), problems


def test_grade_without_a_selection_grades_every_assignment_even_as_a_self_check_by_root(tmp_path, monkeypatch):
    run = Grading(monkeypatch, level="self-check")
    monkeypatch.setattr(G.os, "geteuid", lambda: 0, raising=False)   # require_isolation=False accepts a self-check as root
    got = G.grade(loose(tmp_path, "adamw.py"), salt=7, require_isolation=False)
    assert sorted(c["key"] for c in run.calls) == sorted(C.BY_KEY)            # two workers: any order of calls
    assert list(dict.fromkeys(e["assignment"] for e in got)) == [a.key for a in C.ASSIGNMENTS], "the entries in course order"
    assert {c["timeout"] for c in run.calls} == {60.0}, "the default deadline is 60 s per assignment (docs/classroom.md)"
    assert {c["level"] for c in run.calls} == {"self-check"}
    assert run.calls[0]["work"].parent.name.startswith("minbert-grade-")
    assert set(got.refused) == set(C.BY_KEY)


def test_grade_lays_over_a_single_uploaded_file(tmp_path, monkeypatch):
    run = Grading(monkeypatch)
    G.grade(loose(tmp_path, "adamw.py") / "adamw.py", selected=["adamw"], salt=7, require_isolation=False)
    assert run.calls[0]["problems"] == [] and \
        run.calls[0]["files"]["minbert/adamw.py"] == as_handed_out("minbert/adamw.py")


def test_grade_of_a_partial_hand_out_accepts_the_students_own_copy_of_a_shared_file(tmp_path, monkeypatch):
    # layers.py holds the embeddings and the layer blocks; a hand-out of embeddings alone gives the layer in the clear
    run = Grading(monkeypatch)
    sub = tmp_path / "copy"
    sub.mkdir()
    (sub / "layers.py").write_text(G.submission.graded_files({"embeddings"}, handout={"embeddings"})["minbert/bert/layers.py"])
    G.grade(sub, selected=["embeddings"], handout=["embeddings"], salt=7, require_isolation=False)
    assert run.calls[0]["problems"] == [], run.calls[0]["problems"]


@pytest.mark.parametrize("level", ["user+chroot", "namespaces", "self-check"])
def test_the_hard_link_tree_is_made_only_for_user_chroot_and_every_box_gets_it(level, tmp_path, monkeypatch):
    run = Grading(monkeypatch, level=level)
    G.grade(loose(tmp_path, "adamw.py"), selected=["adamw", "attention"], salt=7, require_isolation=False)
    given = {c["box"]["chroot_root"] for c in run.calls}
    if level == "user+chroot":
        assert len(run.trees) == 1 and run.trees[0] == run.calls[0]["work"].parent / "root" and \
            given == {str(run.trees[0])}, (run.trees, given)
    else:
        assert run.trees == [] and given == {None}, f"a hard-link tree was made at the {level!r} level"
    assert all(isinstance(c["box"]["stop"], threading.Event) for c in run.calls)
    assert not run.calls[0]["work"].parent.exists(), "the grade's temporary folder (and the tree in it) must go"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_a_signal_mid_grade_stops_every_box_and_removes_the_grades_folder(signum, tmp_path, monkeypatch):
    """SIGTERM or SIGHUP (a scheduler's timeout, a closed terminal) killed the grader on the spot: no `finally` ran,
    and the boxes' folders and the hard-link tree stayed on disk. Here a box receives the signal mid-grade (as
    the grader would, in its main thread): the grade raises cleanup.Stopped, every box still running is told to
    stop (its stop event is set: sandbox.run kills it within 0.5 s), and the grade's folder is gone."""
    run = Grading(monkeypatch)
    seen = {}

    def box(a, cases, wants, template, work, problems, timeout, level, secrets, **options):
        seen.setdefault("folder", template.parent)
        if a.key == "attention":
            os.kill(os.getpid(), signum)
            seen["stopped"] = options["stop"].wait(60)             # the other worker's box, still running
        return []
    monkeypatch.setattr(G, "grade_assignment", box)
    before = signal.getsignal(signum)
    with pytest.raises(cleanup.Stopped) as e:
        G.grade(loose(tmp_path, "adamw.py"), selected=["attention", "adamw", "smart"], salt=7, workers=2,
                require_isolation=False)
    assert e.value.signum == signum and seen["stopped"], "the box still running was not told to stop"
    assert not seen["folder"].exists() and run.trees and not os.path.exists(run.trees[0]), \
        "the grade's temporary folder or its hard-link tree was left on disk"
    assert signal.getsignal(signum) == before, "the grader's own signal handlers must be put back"


def test_an_explicit_salt_0_is_kept_and_a_regrade_with_it_draws_the_same_cases(tmp_path, monkeypatch, capsys):
    """`--salt 0` is the salt 0, not "no salt" (which draws a fresh random one): both grades record 0 and draw the
    same cases, and a grade without --salt draws others."""
    import json

    from minbert.classroom.cli import main
    run = Grading(monkeypatch)

    def box(a, cases, *rest, **options):
        run.assignment(a, cases, *rest, **options)
        return [{"name": f"{a.key}: case 1", "assignment": a.key, "score": 0.0, "max_score": 10.0, "output": "x",
                 "visibility": "visible", "execution_time": 0.0, "isolation": ["rlimits"]}]
    monkeypatch.setattr(G, "grade_assignment", box)
    sub = loose(tmp_path, "bert/attention.py")
    for i, salt in enumerate((["--salt", "0"], ["--salt", "0"], [])):
        main(["grade", str(sub), "--assignments", "attention", "--json", str(tmp_path / f"r{i}.json"), *salt])
    reports = [json.loads((tmp_path / f"r{i}.json").read_text()) for i in range(3)]
    assert [r["extra_data"]["salt"] for r in reports[:2]] == [0, 0], [r["extra_data"] for r in reports]
    assert "salt: 0 (instructor only: a regrade with --salt 0 draws the same cases)" in capsys.readouterr().out
    x = [c["cases"][0]["x"] for c in run.calls]
    assert torch.equal(x[0], x[1]), "two grades with --salt 0 drew different cases"
    assert reports[2]["extra_data"]["salt"] != 0 and not torch.equal(x[0], x[2]), "without --salt: a fresh salt"
