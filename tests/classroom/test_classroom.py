"""Tests of the classroom edition: the student copy, the grader, the exploits, the autograder zip.

Instructor-only (left out of the student copy). Oracles: (c) properties of the copy built from a
clean checkout — no removed solution line, reference or instructor section anywhere in it or in
its git history, every assignment scores 0 there; the repository's own solution scores full
points; each known exploit scores 0 for its assignment; a broken or hanging assignment costs
only itself; results.json follows Gradescope's documented schema (score, tests with name,
score, max_score, output, visibility; execution_time).
Runtime: ~2-3 minutes (each grade starts one child process per assignment). The tests that grade, or run
pytest or a training in the copy, are marked slow: CI runs them, the README's quick command does not.
"""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from minbert.classroom import assignments as classroom, autograder
from minbert.core import hub
from minbert.bert.config import BertConfig
from minbert.bert.model import BertModel
from minbert.classroom.assignments import package_file
from minbert.core.errors import UserError

from classroom_helpers import (ALL, ROOT, first_failure, grade, needs_isolation, run, scores, student,  # noqa: F401
                               submission)


# ---------------------------------------------------------------------- the hand-out

def test_student_copy_is_one_commit_without_instructor_files_or_section(student):
    log = subprocess.run(["git", "log", "--oneline"], cwd=student, capture_output=True, text=True).stdout.splitlines()
    assert len(log) == 1, f"the student copy must be a fresh repository with one commit, got {log}"
    for rel in ("minbert/classroom", "minbert/classroom/assignments.py", "tests/classroom", "docs/classroom.md",
                "tests/classroom/test_grader_references_attention.py"):
        assert not (student / rel).exists(), f"instructor-only {rel} leaked into the student copy"
    readme = (student / "README.md").read_text()
    assert "## Assignments\n" in readme, "the student README lacks its Assignments section"
    assert "## Assignments: the classroom edition" not in readme and "classroom check" not in readme, (
        "the instructor's section (build, check, restore a solution) must not ship to students")
    for word in ("classroom.py", "grader/", "minbert.classroom", "docs/classroom.md", "tests/classroom"):
        assert word not in readme, f"the student README names the instructor-only {word!r}"
    assert readme.index("## Assignments") < readme.index("## Quick start") < readme.index("## The files")


@pytest.mark.slow
def test_the_student_readmes_first_check_passes_in_the_copy(student):
    """The set-up check the student README gives must pass before the student writes anything. Slow: a second
    pytest in the copy imports torch and transformers (the config test's oracle), 46 s at load 7 on 2 cores."""
    readme = (student / "README.md").read_text()
    command = next(line.split("#")[0].split() for line in readme.splitlines() if line.startswith("python -m pytest"))
    r = run(*command[1:], "-p", "no:cacheprovider", cwd=student)
    assert r.returncode == 0, f"`{' '.join(command)}` fails in a fresh student copy:\n{r.stdout[-2000:]}{r.stderr[-1000:]}"


def test_readme_stub_line_numbers_are_the_stubs_lines(student):
    readme = (student / "README.md").read_text()
    cited = set(__import__("re").findall(r"`(minbert/[\w/]+\.py):(\d+)`", readme))
    assert len(cited) >= len(ALL), f"the README should cite every stub's file:line, found {sorted(cited)}"
    for rel, n in cited:
        line = (student / rel).read_text().splitlines()[int(n) - 1]
        assert "raise NotImplementedError(\"assignment" in line, f"README cites {rel}:{n}, which is {line.strip()!r}"


def test_no_removed_line_or_reference_anywhere_in_the_copy_or_its_history(student):
    found = autograder.leaks(student)
    assert not found, "the student copy shows solution lines or references:\n" + "\n".join(found[:10])
    history = subprocess.run(["git", "log", "-p", "--all"], cwd=student, capture_output=True, text=True).stdout
    removed = {ln.strip() for f in ("layers.py", "attention.py", "adamw.py", "pcgrad.py")
               for ln in classroom.strip((ROOT / package_file(f)).read_text(), package_file(f), set(ALL))[1]
               if len(ln.strip()) >= 16 and not ln.strip().endswith(":")}
    leaked = [r for r in removed if r in history]
    assert not leaked, f"the student copy's git history holds removed solution lines: {leaked[:3]}"


@pytest.mark.slow
def test_the_copy_scores_zero_and_the_repository_full_points(student):
    zero, full = grade(student), grade(ROOT)
    assert sum(e["max_score"] for e in full) == pytest.approx(110)
    lost = [(e["name"], e["output"]) for e in full if e["score"] < e["max_score"]]
    assert not lost, f"the reference solution lost points: {lost[:3]}"
    got = [(e["name"], e["output"]) for e in zero if e["score"] > 0]
    assert not got, f"the untouched student copy scored: {got[:3]}"
    stubs = [e for e in zero if "NotImplementedError" in e["output"] and "assignment" in e["output"]]
    assert len(stubs) == len(zero), "every case of the copy should fail with its stub's message"


def test_a_virtual_environment_inside_the_graded_folder_is_not_walked(student, tmp_path, monkeypatch):
    """CI grades the repository with its .venv-ci inside (30,000+ files): the walk must not count or read
    hidden folders, __pycache__ or a venv (found by its pyvenv.cfg, whatever its name)."""
    from minbert.classroom import submission as sub_mod
    sub = tmp_path / "sub"
    shutil.copytree(student, sub, ignore=shutil.ignore_patterns(".git"))
    own = sum(len(d) + len(f) for _, d, f in os.walk(sub))
    for venv in (sub / ".venv-ci", sub / "env"):
        (venv / "lib" / "minbert").mkdir(parents=True)
        (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
        for i in range(50):
            (venv / "lib" / f"m{i}.py").write_text("")
        (venv / "lib" / "minbert" / "attention.py").write_text("hidden = True\n")
    monkeypatch.setattr(sub_mod, "MAX_ENTRIES", own + 5)
    files, refused = sub_mod.files_of(sub)
    inside = [r for r in files if r.startswith((".venv-ci", "env"))]
    assert not inside and not refused, f"files_of walked a virtual environment: {inside[:3]} {refused[:3]}"
    assert sub_mod.find(files, "minbert/bert/attention.py") == sub / package_file("attention.py")


# ---------------------------------------------------------------------- exploits

@pytest.mark.slow
@pytest.mark.parametrize("exploit", autograder.EXPLOITS, ids=lambda f: f.__name__)
def test_each_exploit_scores_zero_for_its_assignment(exploit, student, tmp_path):
    sub = submission(student, tmp_path)
    key = exploit(sub)
    entries = grade(sub, {key})
    assert scores(entries)[key] == 0, f"{exploit.__name__}: {key} scored {scores(entries)[key]}: {entries[0]['output']}"


@pytest.mark.slow
def test_banned_call_is_named_with_its_line(student, tmp_path):
    sub = submission(student, tmp_path)
    next(e for e in autograder.EXPLOITS if e.__name__ == "exploit_sdpa")(sub)
    msg = first_failure(grade(sub, {"attention"}), "attention")
    assert "scaled_dot_product_attention" in msg and "minbert/bert/attention.py:" in msg, msg


@pytest.mark.slow
def test_a_change_outside_the_blocks_is_reported_and_zeroes_that_files_assignments(student, tmp_path):
    sub = submission(student, tmp_path, restore=["layers.py", "adamw.py"])
    f = sub / package_file("layers.py")
    f.write_text(f.read_text().replace("self.max_positions = config.max_position_embeddings",
                                       "self.max_positions = 10**6"))
    entries = grade(sub, {"embeddings", "layer", "adamw"})
    assert scores(entries) == {"embeddings": 0, "layer": 0, "adamw": 10}, scores(entries)
    assert "line " in first_failure(entries, "embeddings") and "10**6" in first_failure(entries, "embeddings")


# ---------------------------------------------------------------------- isolation

@pytest.mark.slow
def test_a_syntax_error_in_smart_leaves_attention_and_adamw_at_full_points(student, tmp_path):
    sub = submission(student, tmp_path, restore=["attention.py", "adamw.py"])
    autograder._replace_block(sub / package_file("smart.py"), "smart", "return (p - q).pow(2).mean(")
    entries = grade(sub, {"attention", "adamw", "smart"})
    assert scores(entries) == {"attention": 10, "adamw": 10, "smart": 0}, scores(entries)
    msg = first_failure(entries, "smart")
    assert "syntax error at line" in msg and "minbert/methods/smart.py" in msg, f"the message should name the file and line: {msg}"


@pytest.mark.slow
def test_an_infinite_loop_costs_only_its_assignment_within_the_limit(student, tmp_path):
    """The limit is per assignment: the loop's box is stopped at it, and attention's box, beside it, is graded in
    full. The limit leaves attention's box room on a loaded machine (its start-up imports torch and installs the
    fence: 8 s was too little at a load of 4 on 2 cores, and attention scored 0)."""
    sub = submission(student, tmp_path, restore=["attention.py"])
    autograder._replace_block(sub / package_file("pcgrad.py"), "surgery", "while True:\n    pass")
    entries = grade(sub, {"attention", "surgery"}, timeout=30)
    assert scores(entries) == {"attention": 10, "surgery": 0}, \
        f"{scores(entries)}; attention's first failure: {first_failure(entries, 'attention')}"
    assert "timed out after 30 s" in first_failure(entries, "surgery")


@pytest.mark.parametrize("key, block, hint", [
    ("adamw", "for p, m, v, t in zip(params, exp_avgs, exp_avg_sqs, steps):\n"
              "    g = p.grad\n    p.mul_(1 - lr * wd)\n    m.mul_(beta1).add_(g, alpha=1 - beta1)\n"
              "    v.mul_(beta2).addcmul_(g, g, value=1 - beta2)\n    p.addcdiv_(m, v.sqrt() + eps, value=-lr)", "bias correction"),
    ("attention", "scores = q @ k.transpose(-2, -1) + mask\n"
                  "y = dropout(F.softmax(scores, dim=-1), self.dropout_prob, self.training) @ v", "not scaled"),
    ("adamw", "for p, m, v, t in zip(params, exp_avgs, exp_avg_sqs, steps):\n"
              "    g = p.grad\n    p.mul_(1 - lr * wd)\n    m.mul_(beta1).add_(g, alpha=1 - beta1)\n"
              "    v.mul_(beta2).addcmul_(g, g, value=1 - beta2)\n"
              "    denom = (v.sqrt() + eps) / (1 - beta2**t) ** 0.5\n"
              "    p.addcdiv_(m, denom, value=-lr / (1 - beta1**t))", "uncorrected sqrt(v)"),
    ("attention", "scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim) - mask\n"
                  "y = dropout(F.softmax(scores, dim=-1), self.dropout_prob, self.training) @ v", "subtracted"),
    ("layer", "x = h + self.attention_dense(self.self_attention(self.attention_layer_norm(h), mask))\n"
              "r = x + self.out_dense(F.gelu(self.interm_dense(self.out_layer_norm(x))))\n"
              "return r if extra is None else r + extra", "pre-LN"),
    ("pals", "s = h @ V_E.weight + V_E.bias\ns = g(s, mask)\nreturn F.gelu(s @ V_D.weight + V_D.bias)", "instead of Wᵀ"),
    ("mml", "w = self.active.float() / self.active.sum()\n"
            "if self.num_outputs == 1:\n    return torch.einsum('bmk,m->bk', outputs.float(), w)[:, 0]\n"
            "return torch.einsum('bmk,m->bk', outputs.float().softmax(-1), w)", "LOGITS"),
])
@pytest.mark.slow
def test_usual_mistakes_get_their_hint(key, block, hint, student, tmp_path):
    sub = submission(student, tmp_path)
    f = {"adamw": "adamw.py", "attention": "attention.py", "mml": "mml.py", "layer": "layers.py", "pals": "pals.py"}[key]
    autograder._replace_block(sub / package_file(f), key, block, nth=1 if key == "mml" else 0)
    msgs = [e["output"] for e in grade(sub, {key}, salt=1) if e["score"] < e["max_score"]]   # fixed salt: the same cases each run
    assert any(hint in m for m in msgs), f"{key}: expected a hint naming {hint!r}, got {msgs[:2]}"


# ---------------------------------------------------------------------- layouts and Gradescope

@pytest.mark.slow
@pytest.mark.parametrize("layout", ["repository", "flat_repository", "package", "loose"])
def test_every_submission_layout_is_graded(layout, tmp_path):
    """flat_repository: a copy handed out before the layer folders (minbert/meanshift.py) grades the same."""
    sub = tmp_path / "sub"
    if layout == "flat_repository":
        (sub / "minbert").mkdir(parents=True)
        shutil.copyfile(ROOT / package_file("meanshift.py"), sub / "minbert" / "meanshift.py")
    elif layout == "repository":
        (sub / package_file("meanshift.py")).parent.mkdir(parents=True)
        shutil.copyfile(ROOT / package_file("meanshift.py"), sub / package_file("meanshift.py"))
    else:
        (sub / ("nested" if layout == "loose" else "")).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / package_file("meanshift.py"), sub / ("nested" if layout == "loose" else "") / "meanshift.py")
    entries = grade(sub, {"meanshift", "surgery"})
    assert scores(entries) == {"meanshift": 10, "surgery": 0}, scores(entries)
    assert "not in the submission" in first_failure(entries, "surgery")


@pytest.mark.slow
@needs_isolation                    # Gradescope's entry point grades isolated or not at all
def test_autograder_zip_runs_end_to_end_and_results_json_validates(tmp_path):
    r = run("-m", "minbert", "classroom", "autograder", tmp_path / "out", "--assignments", "attention,adamw,smart", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    root = tmp_path / "autograder"
    with zipfile.ZipFile(tmp_path / "out" / "autograder.zip") as z:
        names = set(z.namelist())
        assert {"setup.sh", "run_autograder", "source/minbert/classroom/grade.py", "source/requirements.txt"} <= names, names
        z.extractall(root / "unzipped")
    shutil.copytree(root / "unzipped" / "source", root / "source")
    (root / "submission").mkdir()
    for f in ("attention.py", "adamw.py"):                   # loose files, as Gradescope's upload gives them
        shutil.copyfile(ROOT / package_file(f), root / "submission" / f)
    env = {**os.environ, "MINBERT_AUTOGRADER_ROOT": str(root), "PYTHON": sys.executable}
    p = subprocess.run(["bash", str(root / "unzipped" / "run_autograder")], env=env, capture_output=True, text=True, timeout=300)
    results = root / "results" / "results.json"
    assert p.returncode == 0 and results.exists(), f"run_autograder failed:\n{p.stdout}{p.stderr}"
    report = json.loads(results.read_text())
    assert {"score", "tests", "output", "execution_time"} <= set(report), sorted(report)
    assert report["score"] == pytest.approx(sum(t["score"] for t in report["tests"]))
    for t in report["tests"]:
        assert set(t) == {"name", "score", "max_score", "output", "visibility", "execution_time"}, sorted(t)
        assert isinstance(t["name"], str) and isinstance(t["output"], str) and t["output"]
        assert 0 <= t["score"] <= t["max_score"] and t["visibility"] in {"visible", "hidden", "after_due_date", "after_published"}
    students = [t for t in report["tests"] if t["visibility"] != "hidden"]
    assert {t["visibility"] for t in students} == {"visible", "after_due_date"}
    hidden = [t for t in report["tests"] if t["visibility"] == "hidden"]
    assert [t["name"] for t in hidden] == ["instructor only: salt and the gate's refusals"] and hidden[0]["max_score"] == 0
    assert scores([{**t, "assignment": t["name"].split(": ")[0].split(". ")[1]} for t in students]) == {
        "attention": 10, "adamw": 10, "smart": 0}


@pytest.mark.slow
@needs_isolation
def test_an_empty_submission_still_gets_a_results_json(tmp_path):
    (tmp_path / "source").mkdir()
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "notes.txt").write_text("forgot the code")
    (tmp_path / "source" / "assignments.txt").write_text("attention\n")
    assert autograder.run(tmp_path) == 0
    report = json.loads((tmp_path / "results" / "results.json").read_text())
    assert report["score"] == 0 and "no Python file" in report["output"] and report["tests"], report["output"]


# ---------------------------------------------------------------------- the stripper and the copy's own use

def test_stripper_keeps_hints_and_markers_and_rejects_broken_markers():
    src = ("def f(x):\n    # Hint: double it\n    ### BEGIN SOLUTION adamw\n    return 2 * x\n    ### END SOLUTION\n")
    text, removed = classroom.strip(src, "minbert/toy.py", {"adamw"})
    assert "# Hint: double it" in text and "return 2 * x" not in text and removed == ["    return 2 * x\n"]
    assert "### BEGIN SOLUTION adamw" in text and "### END SOLUTION" in text, "the markers frame the student's code"
    assert 'raise NotImplementedError("assignment 4 (adamw): write minbert.toy.f (minbert/toy.py:5)' in text
    kept, _ = classroom.strip(src, "minbert/toy.py", set())
    assert "return 2 * x" in kept and "SOLUTION" not in kept, "unselected blocks keep their code and lose their markers"
    for bad in (src.replace("### END SOLUTION\n", ""), src.replace("adamw", "nope"), src.replace("    ### BEGIN SOLUTION adamw\n", "")):
        with pytest.raises(UserError):
            classroom.strip(bad, "minbert/toy.py", {"adamw"})


@pytest.mark.slow
def test_pytest_collects_the_student_copy(student):
    r = run("-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", cwd=student)
    summary = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    assert r.returncode == 0 and "tests collected" in summary and "error" not in summary, (
        f"pytest --collect-only on the student copy must collect every test without import errors:\n{r.stdout[-3000:]}{r.stderr}")


@pytest.mark.slow
def test_training_on_the_student_copy_stops_with_the_first_missing_piece_in_one_line(student, tmp_path):
    from conftest import write_task_files   # tests/ is on sys.path under pytest
    data, model = tmp_path / "data", tmp_path / "model"
    data.mkdir()
    write_task_files(data)
    torch.manual_seed(0)
    BertModel(BertConfig.tiny()).save_pretrained(model)
    shutil.copy(hub.resolve("minilm-l6") / "vocab.txt", model / "vocab.txt")
    r = run("train_multitask.py", "--model", model, "--data_dir", data, "--limit", 16, "--epochs", 1,
            "--device", "cpu", "--out_dir", tmp_path / "run", cwd=student)
    last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
    assert r.returncode == 2 and "Traceback" not in r.stderr and last.startswith("error: assignment "), (
        f"train_multitask.py on the student copy: expected one 'error: assignment ...' line and exit 2, got {r.returncode}:\n{r.stderr[-2000:]}")


@pytest.mark.slow
def test_a_partial_grade_of_a_full_hand_out_keeps_the_other_blocks_stubbed(student, tmp_path):
    """Grading one assignment of layers.py (which holds two) must not read the other block as a change."""
    sub = submission(student, tmp_path, restore=["layers.py"])
    assert scores(grade(sub, {"embeddings"})) == {"embeddings": 10}


# ---------------------------------------------------------------------- a broken dependency says so

@pytest.mark.slow
def test_a_syntax_error_in_attention_names_its_cause_in_every_assignment_that_imports_it(student, tmp_path):
    """attention.py is imported by six assignments' runs (the fast path is given code); each must say why it
    could not run, and the four that never import it keep their points."""
    sub = submission(student, tmp_path, restore=["adamw.py", "meanshift.py", "smart.py", "mml.py", "layers.py"])
    autograder._replace_block(sub / package_file("attention.py"), "attention", "y = (q @ k")
    entries = grade(sub)
    line = next(n for n, text in enumerate((sub / package_file("attention.py")).read_text().splitlines(), 1)
                if text.strip() == "y = (q @ k")
    want = f"could not run: your minbert/bert/attention.py has a syntax error at line {line}"
    for key in ("embeddings", "attention", "layer", "multitask", "pals", "surgery"):
        assert want in first_failure(entries, key), f"{key}: expected {want!r}, got {first_failure(entries, key)!r}"
    got = scores(entries)
    assert {k: got[k] for k in ("adamw", "smart", "meanshift", "mml")} == {"adamw": 10, "smart": 15, "meanshift": 10,
                                                                        "mml": 10}, got


def test_the_docs_table_of_files_each_assignment_imports_is_true():
    from minbert.classroom.submission import files_used, graded_files
    text = (ROOT / "docs" / "classroom.md").read_text()
    table = text.split("<!-- files-used:begin -->")[1].split("<!-- files-used:end -->")[0]
    rows = {r.split("|")[1].strip(): r.split("|")[2].strip() for r in table.strip().splitlines()[2:]}
    graded = graded_files(set(ALL))
    want = {k: ", ".join(f.removeprefix("minbert/") for f in files_used(k) if f in graded) for k in ALL}
    assert rows == want, f"docs/classroom.md's table is stale; it should read {want}"


def test_each_assignment_is_one_record_and_its_key_names_its_maker_scenario_and_hints():
    """Adding an assignment touched five registries keyed by the same string; now one record, and the key names
    the rest (docs/classroom.md, "Adding an assignment"). The docs' points line is generated from the records."""
    import inspect

    from minbert.classroom import cases, hints, scenarios
    keys = {a.key for a in classroom.ASSIGNMENTS}

    def named(module, helpers):
        return {n for n, f in vars(module).items() if inspect.isfunction(f) and f.__module__ == module.__name__
                and not n.startswith("_")} - helpers
    assert named(cases, {"draw", "describe"}) == keys, "cases.py needs one maker per assignment key, and no other"
    assert named(scenarios, {"run"}) == keys, "scenarios.py needs one scenario per assignment key, and no other"
    assert named(hints, {"recognise"}) <= keys, "hints.py: a function that is no assignment's key is never used"
    for a in classroom.ASSIGNMENTS:
        assert set(a.fence) <= {"python", "subclasses", "modules"}, f"{a.key}: unknown fence kinds"
    line = (f"{len(classroom.ASSIGNMENTS)} assignments, {classroom.TOTAL} points: "
            + ", ".join(f"{a.key} {a.points}" for a in classroom.ASSIGNMENTS) + ".")
    text = (ROOT / "docs" / "classroom.md").read_text()
    assert text.split("<!-- points:begin -->\n")[1].split("\n<!-- points:end -->")[0] == line, \
        f"docs/classroom.md's points line is stale; it should read:\n{line}"
