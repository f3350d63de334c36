"""What a grade reports (minbert/classroom/results.py): the table, the isolation line, results.json, its writing.

Oracle: (c) hand-worked expectations. Each test builds the grader's entries by hand (as grade_assignment
makes them: name, assignment, score, max_score, output, visibility, isolation, execution_time) and compares
what is printed or written with lines and dicts worked out by hand from the rules in docs/classroom.md and
Gradescope's results.json format (https://gradescope-autograders.readthedocs.io/en/latest/specs/: a top-level
score, execution_time, output, tests; per test name, score, max_score, output, visibility; extra_data).
Fast: no child process, no grading.
"""

import json

from minbert.classroom import results
from minbert.classroom.grade import SELF_CHECK, Grade


def entry(key, n, score, most, output="passed", isolation=(), visibility="visible", seconds=0.25):
    return {"name": f"{key}: case {n}", "assignment": key, "score": score, "max_score": most, "output": output,
            "visibility": visibility, "isolation": list(isolation), "execution_time": seconds}


# ---------------------------------------------------------------------- the table

def test_table_sums_each_assignment_in_course_order_and_shows_its_first_failing_case():
    # smart (assignment 7) is listed first and attention (2) after; embeddings (1) is not graded at all
    entries = [entry("smart", 1, 5.0, 5.0), entry("smart", 2, 0.0, 5.0, "B wrong"), entry("smart", 3, 0.0, 5.0, "C wrong"),
               entry("attention", 1, 5.0, 5.0), entry("attention", 2, 5.0, 5.0)]
    lines = results.table(entries).split("\n")
    assert lines == [
        "assignment       points  first failing check",
        " 2. attention   10.0 / 10   ",                  # all passed: no failing check is shown
        " 7. smart        5.0 / 15   B wrong",           # the first case that lost points, not the first case
        "total           15.0 / 25",
        "isolation: no code was run"], (
        "minbert.classroom.results.table: one row per graded assignment in course order (its number, points got / "
        "points possible, the first case with score < max_score), then the total\n" + "\n".join(lines))


def test_table_cuts_a_long_failing_message_at_300_characters():
    message = "".join(str(i % 10) for i in range(400))
    row = results.table([entry("adamw", 1, 0.0, 10.0, message)]).split("\n")[1]
    assert row == f" 4. adamw        0.0 / 10   {message[:300]}", (
        f"minbert.classroom.results.table: the failing message must be cut to its first 300 characters, got {len(row)}")


def test_table_of_a_grade_ends_with_the_salt_and_the_gates_refusals():
    grade = Grade([entry("mml", 1, 1.25, 1.25, isolation=["rlimits"])], salt=123,
                  refused={"mml": ["minbert/methods/mml.py:40: `getattr` is not on assignment mml's list; ..."]})
    assert results.table(grade).split("\n")[-5:] == [
        "total            1.2 / 1.25",
        "isolation: rlimits",
        "salt: 123 (instructor only: a regrade with --salt 123 draws the same cases)",
        "gate: refused blocks (each scores 0 where its function is graded):",
        "  mml: minbert/methods/mml.py:40: `getattr` is not on assignment mml's list; ..."], results.table(grade)


def test_refusals_text_lists_every_refusal_under_its_assignment():
    assert results.refusals_text({}) == results.refusals_text({"pals": []}) == "gate: no solution block was refused"
    assert results.refusals_text({"pals": ["a.py:1: x", "a.py:2: y"], "smart": ["b.py:3: z"]}).split("\n") == [
        "gate: refused blocks (each scores 0 where its function is graded):",
        "  pals: a.py:1: x", "  pals: a.py:2: y", "  smart: b.py:3: z"]


# ---------------------------------------------------------------------- the isolation line

def test_isolation_line_names_the_first_boxs_layers():
    entries = [entry("attention", 1, 0.0, 5.0, "could not run: a syntax error"),          # never ran: no layers
               {k: v for k, v in entry("attention", 2, 0.0, 5.0).items() if k != "isolation"},
               entry("adamw", 1, 5.0, 5.0, isolation=["a separate user", "rlimits"]),
               entry("smart", 1, 5.0, 5.0, isolation=["other"])]
    assert results.isolation_line(entries) == "isolation: a separate user, rlimits"


def test_isolation_line_says_self_check_only_when_a_case_ran_unisolated():
    ran = entry("attention", 1, 5.0, 5.0, f"passed [{SELF_CHECK}]")
    never = entry("adamw", 1, 0.0, 5.0, "could not run: your minbert/adamw.py has a syntax error at line 3")
    assert results.isolation_line([never, ran]) == (
        "isolation: none on this machine; this grade is a self-check, not authoritative")
    assert results.isolation_line([never]) == "isolation: no code was run"
    assert results.isolation_line([]) == "isolation: no code was run"


# ---------------------------------------------------------------------- results.json

PASSED = entry("attention", 1, 3.3333, 3.3333, isolation=["rlimits"], seconds=0.125)
MISSED = {**entry("attention", 2, 0.0, 6.6667, "y: holds NaN or inf", ["rlimits"], "after_due_date"),
          "name": "2. attention: hidden case 2 (x (3, 6, 4))"}
TESTS = [{"name": "attention: case 1", "score": 3.3333, "max_score": 3.3333, "output": "passed",
          "visibility": "visible", "execution_time": 0.125},
         {"name": "2. attention: hidden case 2 (x (3, 6, 4))", "score": 0.0, "max_score": 6.6667,
          "output": "y: holds NaN or inf", "visibility": "after_due_date", "execution_time": 0.25}]


def test_results_json_holds_gradescopes_fields_summed_and_nothing_of_the_grader():
    report = results.results_json([PASSED, MISSED])
    assert report == {"score": 3.3333, "execution_time": 0.375,
                      "output": "2 cases; hidden ones show after the due date (isolation: rlimits)", "tests": TESTS}, (
        "minbert.classroom.results.results_json: the score is the sum of the cases' scores, the time the sum of "
        f"theirs, and each test keeps only Gradescope's keys:\n{json.dumps(report, indent=1)}")
    assert json.loads(json.dumps(report)) == report


def test_results_json_puts_the_graders_message_before_the_isolation_line():
    report = results.results_json([PASSED, MISSED], "no Python file in the submission")
    assert report["output"] == "no Python file in the submission (isolation: rlimits)"


def test_results_json_of_a_grade_adds_one_hidden_zero_point_test_and_extra_data_for_the_instructor():
    refused = {"smart": ["minbert/methods/smart.py:7: `importlib` is not on assignment smart's list"]}
    report = results.results_json(Grade([PASSED, MISSED], salt=99, refused=refused))
    assert report["tests"] == TESTS + [{
        "name": "instructor only: salt and the gate's refusals", "score": 0.0, "max_score": 0.0, "visibility": "hidden",
        "execution_time": 0.0, "output": "salt 99\ngate: refused blocks (each scores 0 where its function is graded):"
                                         "\n  smart: minbert/methods/smart.py:7: `importlib` is not on assignment "
                                         "smart's list"}]
    assert report["extra_data"] == {"salt": 99, "refused": refused}
    assert report["score"] == 3.3333 and report["execution_time"] == 0.375     # the hidden test adds nothing


def test_write_json_replaces_the_file_with_the_whole_report_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "results.json"
    path.write_text("an older report")
    results.write_json(str(path), {"score": 1.5, "tests": []})
    assert path.read_text() == '{\n  "score": 1.5,\n  "tests": []\n}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"], "the temporary file must be renamed over it"
