"""Tests of minbert/classroom.py: the student copy and the grader (instructor-only: left out of the copy).

Oracles: (c) properties of the copy built from a clean checkout (the tracked files only: no .git,
no caches) — every assignment scores 0 there with a message naming the function, restoring one
file gives that assignment full points and no other, no removed solution line appears anywhere
in the copy, pytest collects it, training stops with one line; and the repository itself scores
full points. The grader's JSON is checked against Gradescope's documented schema.
Runtime: ~1 minute (four grading runs and one tiny training run, each a subprocess).
"""

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

from minbert import classroom, hub
from minbert.config import BertConfig
from minbert.errors import UserError
from minbert.model import BertModel

ROOT = Path(__file__).resolve().parents[1]
ALL = [a.key for a in classroom.ASSIGNMENTS]


def run(*args, cwd):
    return subprocess.run([sys.executable, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """A clean checkout: the repository's tracked files as they are in the working tree."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True)
    files = [f for f in out.stdout.split("\0") if f and (ROOT / f).is_file()] if out.returncode == 0 else [
        str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and not {".git", "__pycache__"} & set(p.parts)]
    dst = tmp_path_factory.mktemp("checkout")
    for f in files:
        (dst / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / f, dst / f)
    return dst


@pytest.fixture(scope="module")
def student(checkout, tmp_path_factory):
    out = tmp_path_factory.mktemp("student") / "copy"
    r = run("-m", "minbert.classroom", "student", out, cwd=checkout)
    assert r.returncode == 0, f"minbert.classroom student failed:\n{r.stdout}{r.stderr}"
    return out


@pytest.fixture(scope="module")
def graded_student(student, tmp_path_factory):
    """`grade --json` of the whole student copy: (exit status, table, parsed JSON)."""
    report = tmp_path_factory.mktemp("grade") / "results.json"
    r = run("-m", "minbert.classroom", "grade", student, "--json", report, cwd=ROOT)
    return r.returncode, r.stdout + r.stderr, json.loads(report.read_text()) if report.exists() else None


def test_student_copy_has_no_history_caches_results_or_instructor_test(student):
    assert (student / "minbert" / "layers.py").is_file() and (student / "train_multitask.py").is_file()
    leaked = [str(p.relative_to(student)) for p in student.rglob("*")
              if p.name in (".git", "__pycache__", ".pytest_cache") or p.suffix == ".pyc"]
    assert not leaked, f"minbert.classroom.student: the copy must not contain {leaked}"
    assert not (student / "bench" / "results").exists(), "minbert.classroom.student: benchmark results leaked into the copy"
    assert not (student / "tests" / "test_classroom.py").exists(), "minbert.classroom.student: the instructor's test leaked"
    readme = (student / "README.md").read_text()
    assert "## Assignments" in readme and "minbert.adamw.AdamW.step" in readme, "minbert.classroom.student: README lacks the Assignments section"


def test_no_removed_solution_line_appears_anywhere_in_the_student_copy(checkout, student):
    """Every removed line (16+ characters once stripped) is searched for in every text file of the copy,
    except block headers (a line ending in ':', such as `if task == "para":`): alone they spell no
    solution, and the given code has the same ones."""
    removed = set()
    for f in checkout.rglob("*.py"):
        rel = str(f.relative_to(checkout))
        if classroom.BEGIN in f.read_text() and rel != "minbert/classroom.py":
            removed |= {line.strip() for line in classroom.strip(f.read_text(), rel, set(ALL))[1] if len(line.strip()) >= 16 and not line.strip().endswith(":")}
    assert len(removed) > 100, f"expected the solutions' lines, found only {len(removed)}"
    for path in student.rglob("*"):
        if not path.is_file():
            continue
        try:
            lines = path.read_text().splitlines()
        except UnicodeDecodeError:
            continue            # binary files (the .npz fixture) hold no source lines
        for n, line in enumerate(lines, 1):
            found = [r for r in removed if r in line]
            assert not found, f"{path.relative_to(student)}:{n} contains the removed solution line {found[0]!r}"


def test_every_assignment_scores_zero_on_the_student_copy_naming_the_function(graded_student):
    status, table, report = graded_student
    assert status == 0 and report is not None, f"minbert.classroom grade must exit 0 whatever the score:\n{table}"
    for a in classroom.ASSIGNMENTS:
        mine = [t for t in report["tests"] if t["name"].split(":")[0].split(". ")[1] == a.key]
        assert len(mine) == len(a.tests), f"grade: {a.key} should report {len(a.tests)} tests, got {len(mine)}"
        for t in mine:
            assert t["score"] == 0, f"grade: {t['name']} scored {t['score']} on the student copy, expected 0"
            assert "NotImplementedError" in t["output"] and any(f in t["output"] for f in a.functions), (
                f"grade: {t['name']} should fail with the stub naming one of {a.functions}, got {t['output']!r}")
    assert "total            0 / " in table, f"grade: table total should be 0:\n{table}"


def test_grade_json_follows_the_gradescope_schema_and_score_is_the_sum(graded_student):
    report = graded_student[2]
    assert set(report) == {"score", "tests"}, f"grade --json: top-level keys {sorted(report)}, expected score and tests"
    for t in report["tests"]:
        assert set(t) == {"name", "score", "max_score", "output"}, f"grade --json: test keys {sorted(t)}"
        assert isinstance(t["name"], str) and isinstance(t["output"], str)
        assert isinstance(t["score"], (int, float)) and isinstance(t["max_score"], (int, float)) and 0 <= t["score"] <= t["max_score"]
    assert report["score"] == sum(t["score"] for t in report["tests"]), "grade --json: score must equal the sum of the tests"
    assert sum(t["max_score"] for t in report["tests"]) == sum(sum(a.tests.values()) for a in classroom.ASSIGNMENTS)


def test_restoring_one_file_gives_its_assignment_full_points_and_no_other(student, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(student, copy)
    shutil.copyfile(ROOT / "minbert" / "adamw.py", copy / "minbert" / "adamw.py")   # the solution, markers included
    entries = classroom.grade(copy, {"adamw", "embeddings", "surgery", "meanshift"})
    scores = {}
    for e in entries:
        scores[e["assignment"]] = scores.get(e["assignment"], 0) + e["score"]
    assert scores == {"embeddings": 0, "adamw": 10, "surgery": 0, "meanshift": 0}, f"grade after restoring adamw.py: {scores}"


def test_the_repository_scores_full_points():
    entries = classroom.grade(ROOT)
    lost = [(e["name"], e["output"]) for e in entries if e["score"] < e["max_score"]]
    assert not lost, f"minbert.classroom.grade: the reference solution lost points: {lost}"


def test_pytest_collects_the_student_copy_and_given_code_passes(student):
    r = run("-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", cwd=student)
    summary = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    assert r.returncode == 0 and "tests collected" in summary and "error" not in summary, (
        f"pytest --collect-only on the student copy must collect every test without import errors:\n{r.stdout[-3000:]}{r.stderr}")
    r = run("-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml", student / "attention.xml", "tests/test_attention.py", cwd=student)
    cases = {c.get("name"): c for c in ET.parse(student / "attention.xml").getroot().iter("testcase")}
    assert cases["test_mask_is_additive_B11T_with_minus_10000_on_pads"].find("failure") is None, "given code must pass on the student copy"
    failure = cases["test_explicit_attention_matches_einsum_reference"].find("failure")
    assert failure is not None and "assignment 2 (attention)" in failure.get("message", ""), "a missing piece must fail with the stub's message"


def test_training_on_the_student_copy_stops_with_the_first_missing_piece_in_one_line(student, tmp_path):
    from test_train_multitask import write_task_files   # tests/ is on sys.path under pytest
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


def test_stripper_keeps_hints_and_rejects_broken_markers():
    src = ("def f(x):\n    # Hint: double it\n    ### BEGIN SOLUTION adamw\n    return 2 * x\n    ### END SOLUTION\n")
    text, removed = classroom.strip(src, "minbert/toy.py", {"adamw"})
    assert "# Hint: double it" in text and "return 2 * x" not in text and removed == ["    return 2 * x\n"]
    assert 'raise NotImplementedError("assignment 4 (adamw): write minbert.toy.f (minbert/toy.py:4)' in text
    kept, _ = classroom.strip(src, "minbert/toy.py", set())
    assert "return 2 * x" in kept and "SOLUTION" not in kept, "unselected blocks keep their code and lose their markers"
    for bad in (src.replace("### END SOLUTION\n", ""), src.replace("adamw", "nope"), src.replace("    ### BEGIN SOLUTION adamw\n", "")):
        with pytest.raises(UserError):
            classroom.strip(bad, "minbert/toy.py", {"adamw"})


def test_assignments_1_to_4_grade_without_transformers_or_sklearn(tmp_path, monkeypatch):
    """`pip install -r requirements.txt pytest` must be enough to grade assignments 1-4: with
    `transformers` and `sklearn` made unimportable, the repository still scores full points."""
    for name in ("transformers", "sklearn"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"raise ImportError('{name} is blocked by test_classroom')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))            # ahead of site-packages in the grader's pytest
    entries = classroom.grade(ROOT, {"embeddings", "attention", "layer", "adamw"})
    lost = [(e["name"], e["output"]) for e in entries if e["score"] < e["max_score"]]
    assert not lost, f"grading assignments 1-4 must not need transformers or scikit-learn: {lost}"
