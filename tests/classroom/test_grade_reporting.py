"""The grader's own reporting (minbert/classroom/grade.py), without starting a child: how a case is compared and
what its message says, how an assignment's points are shared between its cases, which cases are visible, and
what a box's outcome turns into.

Oracles: (c) hand-worked expectations from the rules in docs/classroom.md: every assignment's points
(ASSIGNMENTS) are shared over its cases, each share rounded to 4 places and the last one taking the rest, so
the shares sum to the points; the first 2 cases are visible, the rest after the due date; a float output
passes within atol 1e-5 + rtol 1e-4·|expected| (torch.allclose), an integer output only when equal; a
message names the output, the index and the numbers, or an exception's builtin type and a line that exists in
the student's own file. The box is replaced by a stand-in (monkeypatch) that returns a chosen outcome, so each
test runs in milliseconds.
"""

import hashlib
import json
import os
import struct
import sys

import pytest
import torch

from minbert.classroom import assignments as C, grade as G, sandbox, wire
from minbert.classroom.grade import Message, compare, error_message, outputs_of

TOL = "tolerance 1e-05 + 0.0001·|expected|"


# ---------------------------------------------------------------------- compare: one case's verdict

def test_compare_passes_floats_within_atol_plus_rtol_times_expected_and_fails_just_outside():
    w = torch.tensor([0.0, 1000.0], dtype=torch.float64)
    assert compare({"y": torch.tensor([9e-6, 1000.1])}, {"y": w}) == "", (
        "minbert.classroom.grade.compare: |got - expected| <= 1e-5 + 1e-4·|expected| passes (docs/classroom.md): "
        "9e-6 at 0 and 0.1 at 1000 are inside")
    assert compare({"y": torch.tensor([0.0, 1000.2])}, {"y": w}) == (
        f"y: max abs difference 0.2 at index (1,) (expected 1000, got 1000.2; {TOL})")
    assert compare({"y": torch.tensor([2e-5, 1000.0])}, {"y": w}) == (
        f"y: max abs difference 2e-05 at index (0,) (expected 0, got 2e-05; {TOL})")


def test_compare_names_the_largest_difference_with_its_index_and_both_numbers():
    want = {"y": torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)}
    got = {"y": torch.tensor([[1.0, 2.1], [3.5, 4.0]], dtype=torch.float32)}         # a float32 answer is fine
    assert compare(got, want) == f"y: max abs difference 0.5 at index (1, 0) (expected 3, got 3.5; {TOL})"
    assert compare({"y": torch.tensor(2.5)}, {"y": torch.tensor(2.0, dtype=torch.float64)}) == (
        f"y: max abs difference 0.5 at index () (expected 2, got 2.5; {TOL})")
    assert compare({"y": torch.tensor([1.0, 2.0], dtype=torch.bfloat16)},
                   {"y": torch.tensor([1.0, 2.0], dtype=torch.float64)}) == "", "wants are float64 (scenarios.run)"


def test_compare_checks_every_output_after_an_integer_one_that_matches():
    want = {"n": torch.tensor([[1, 2], [3, 4]]), "y": torch.tensor([1.0], dtype=torch.float64)}
    assert compare({"n": torch.tensor([[1, 2], [3, 4]], dtype=torch.int32), "y": torch.tensor([1.0])}, want) == ""
    assert compare({"n": torch.tensor([[1, 2], [3, 4]]), "y": torch.tensor([7.0])}, want) == (
        f"y: max abs difference 6 at index (0,) (expected 1, got 7; {TOL})")
    assert compare({"n": torch.tensor([[1, 2], [3, 5]]), "y": torch.tensor([1.0])}, want) == (
        "n: expected [[1, 2], [3, 4]], first difference at index (1, 1) (got 5)")
    assert compare({"n": torch.tensor(4)}, {"n": torch.tensor(3)}) == "n: expected 3, first difference at index () (got 4)"


def test_compare_passes_an_integer_output_only_when_equal_never_after_rounding_a_float_answer():
    want = {"n": torch.tensor([2, 0, 5])}
    assert compare({"n": torch.tensor([2.0, 0.0, 5.0])}, want) == "", "a float answer with integer values is equal"
    assert compare({"n": torch.tensor([True, False, False])}, {"n": torch.tensor([1, 0, 0])}) == ""
    assert compare({"n": torch.tensor([2.7, 0.0, 5.0])}, want) == (
        "n: expected [2, 0, 5], first difference at index (0,) (got 2.7)"), "2.7 is not the label 2"
    assert compare({"n": torch.tensor([2.0, -0.5, 5.0])}, want) == (
        "n: expected [2, 0, 5], first difference at index (1,) (got -0.5)")
    assert compare({"n": torch.tensor([2, 1234567, 5])}, want) == (
        "n: expected [2, 0, 5], first difference at index (1,) (got 1234567)"), "an integer answer is quoted whole"


def test_compare_quotes_only_a_bounded_part_of_a_wrong_shape():
    w = torch.zeros(2, 3, dtype=torch.float64)
    assert compare({"y": torch.zeros(6)}, {"y": w}) == "y: expected shape (2, 3) (2 dimensions), got 1 dimensions"
    assert compare({"y": torch.zeros(2_000_000, dtype=torch.bool)}, {"y": torch.zeros(3)}) == (
        "y: expected shape (3,), got (1000000,)"), "a size over 10**6 is quoted as 10**6"
    assert compare({"z": w}, {"y": w}) == "output 'y' is missing"


def test_compare_calls_nan_or_inf_by_name_unless_expected():
    w = torch.tensor([1.0, float("inf")], dtype=torch.float64)
    assert compare({"y": torch.tensor([1.0, float("inf")])}, {"y": w}) == "", "an expected inf is matched"
    assert compare({"y": torch.tensor([float("nan"), 2.0])}, {"y": torch.tensor([1.0, 2.0])}) == "y: holds NaN or inf"


def test_compare_hands_back_a_parents_message_unchanged():
    m = Message("raised KeyError (run your tests locally for the message)")
    assert compare(m, {"y": torch.zeros(1)}) is m


# ---------------------------------------------------------------------- error records: what the student may see

FILES = {"minbert/bert/attention.py": [
    "def forward(self, x):",
    '        raise NotImplementedError("assignment 2 (attention): write minbert.bert.attention ...")',
    "        x = 1",
    '        # raise NotImplementedError("assignment 2 (attention): a comment, not a stub")',
    '        raise NotImplementedError("assignment 2 (secret): a key the grader does not have")']}
RUN = " (run your tests locally for the message)"


@pytest.mark.parametrize("kind, where, banned, text", [
    ("ValueError", "minbert/bert/attention.py:3", "", "raised ValueError at minbert/bert/attention.py:3" + RUN),
    ("ValueError", "minbert/bert/attention.py:1", "", "raised ValueError at minbert/bert/attention.py:1" + RUN),
    ("ValueError", "minbert/bert/attention.py:5", "", "raised ValueError at minbert/bert/attention.py:5" + RUN),
    ("ValueError", "minbert/bert/attention.py:2", "", "raised ValueError at minbert/bert/attention.py:2" + RUN),
    ("ValueError", "minbert/bert/attention.py:0", "", "raised ValueError" + RUN),           # no such line
    ("ValueError", "minbert/bert/attention.py:6", "", "raised ValueError" + RUN),
    ("ValueError", "minbert/bert/layers.py:3", "", "raised ValueError" + RUN),              # not the student's file
    ("ValueError", "/etc/passwd:3", "", "raised ValueError" + RUN),
    ("ValueError", "minbert/bert/attention.py:3 hi", "", "raised ValueError" + RUN),
    ("MyError", "minbert/bert/attention.py:3", "", "raised an exception of a class your code defines at "
                                                   "minbert/bert/attention.py:3" + RUN),
    ("object", "", "", "raised an exception of a class your code defines" + RUN),           # a builtin, not an exception
    ("NotImplementedError", "minbert/bert/attention.py:2", "",
     "not written yet: the stub at minbert/bert/attention.py:2 still raises NotImplementedError (assignment attention)"),
    ("NotImplementedError", "minbert/bert/attention.py:3", "", "raised NotImplementedError at minbert/bert/attention.py:3" + RUN),
    ("NotImplementedError", "minbert/bert/attention.py:4", "", "raised NotImplementedError at minbert/bert/attention.py:4" + RUN),
    ("NotImplementedError", "minbert/bert/attention.py:5", "", "raised NotImplementedError at minbert/bert/attention.py:5" + RUN),
    ("NotImplementedError", "", "", "raised NotImplementedError" + RUN),
    ("Banned", "minbert/bert/attention.py:3", "aten::_scaled_dot_product_flash_attention_for_cpu.default",
     "called aten::_scaled_dot_product_flash_attention_for_cpu.default at minbert/bert/attention.py:3, which assignment "
     "attention does not allow (its list: ALLOWED.md)"),
    ("Banned", "", "torch.ops.aten._scaled_dot_product_attention_math",
     "called torch.ops.aten._scaled_dot_product_attention_math, which assignment attention does not allow (its list: "
     "ALLOWED.md)"),
    ("Banned", "", "MultiheadAttention.forward", "called MultiheadAttention.forward, which assignment attention does "
     "not allow (its list: ALLOWED.md)"),   # refused by name
    ("Banned", "", "a new thread (the fence watches the grading thread only)", "called a new thread (the fence watches "
     "the grading thread only), which assignment attention does not allow (its list: ALLOWED.md)"),
    ("RuntimeError", "", "aten::mm.default", "raised RuntimeError" + RUN),      # on attention's list: not refused
    ("RuntimeError", "", "torch.Tensor.softmax", "raised RuntimeError" + RUN),
    ("RuntimeError", "", "aten::mm", "raised RuntimeError" + RUN),              # not a name the fence writes
    ("Banned", "", "aten::scaled_dot_product_SECRET.default",                   # no such operator: not quoted
     "called an operation that assignment attention does not allow (its list: ALLOWED.md)"),
    ("Banned", "", "torch.SECRET", "called an operation that assignment attention does not allow (its list: "
     "ALLOWED.md)"),
])
def test_an_error_record_becomes_a_builtin_type_a_real_line_or_a_blocked_op(kind, where, banned, text):
    got = error_message(wire.Error(kind, where, banned), FILES, "attention")
    assert isinstance(got, Message) and got == text, f"minbert.classroom.grade.error_message: {got!r}"


def test_the_stub_of_a_block_the_gate_refused_says_the_gates_line_and_nothing_else_does():
    """A refused block keeps its stub; the cases reaching it say the gate's line, not "not written yet"."""
    gated = {"minbert/bert/attention.py:2": "minbert/bert/attention.py:5: `torch.inner` is not on assignment ..."}
    assert error_message(wire.Error("NotImplementedError", "minbert/bert/attention.py:2", ""), FILES, "attention",
                         gated) == gated["minbert/bert/attention.py:2"]
    assert error_message(wire.Error("ValueError", "minbert/bert/attention.py:2", ""), FILES, "attention",
                         gated).startswith("raised ValueError")


def box(result=b"", status=0, why=""):
    return sandbox.Outcome(status, b"", result, why)


def test_outputs_of_says_why_a_box_gave_nothing():
    assert outputs_of(box(why="the wall-clock limit (60 s) was reached"), 1, {}, "attention") == (
        None, "the wall-clock limit (60 s) was reached")
    assert outputs_of(box(status=-9), 1, {}, "attention") == (
        None, "the code was killed by signal 9 before its outputs were saved (a limit: memory, processes or file size?)")
    for status in (0, 1, None):
        assert outputs_of(box(status=status), 1, {}, "attention") == (
            None, f"the code exited (status {status}) before its outputs were saved: an exit() or os._exit in the "
                  "code, or the interpreter crashed")


def test_outputs_of_turns_each_record_into_the_parents_message():
    op = "torch.nn.functional.scaled_dot_product_attention"
    frame = wire.MAGIC + struct.pack("=I", 2) + b"E" + bytes([6]) + b"Banned" + bytes([0]) + \
        bytes([len(op)]) + op.encode() + b"X"
    got, why = outputs_of(box(frame), 2, {}, "attention")
    assert why == "" and got == [
        f"called {op}, which assignment attention does not allow (its list: ALLOWED.md)",
        "the outputs are not a dict of tensors"]
    assert all(isinstance(m, Message) for m in got)


# ---------------------------------------------------------------------- grade_assignment: shares, visibility, messages

class Box:
    """A stand-in for run_child: records its arguments, returns the outcome a test chose."""

    def __init__(self, outputs, why="", layers=("a separate user", "rlimits")):
        self.outputs, self.why, self.layers, self.calls = outputs, why, list(layers), []

    def __call__(self, template_dir, key, cases, job, timeout, level, secrets, **options):
        self.calls.append((template_dir, key, cases, job, timeout, level, secrets))
        return self.outputs, self.why, self.layers


def cases(n):
    return [{"op": "forward", "x": torch.zeros(2, i + 1), "state": torch.zeros(5)} for i in range(n)]


def right(n):
    return [{"y": torch.full((2,), float(i), dtype=torch.float64)} for i in range(n)]


def grade_one(monkeypatch, key, outputs, n, level="user+chroot", problems=(), why=""):
    stand_in = Box(outputs, why)
    monkeypatch.setattr(G, "run_child", stand_in)
    entries = G.grade_assignment(C.BY_KEY[key], cases(n), right(n), "TEMPLATE", G.Path("/grading"), list(problems),
                                 7.5, level, ["secret.py"])
    return entries, stand_in


@pytest.mark.parametrize("key, n, shares", [
    ("attention", 6, [1.6667] * 5 + [1.6665]),        # 10/6 = 1.66667 -> 1.6667; the last: 10 - 5·1.6667 = 1.6665
    ("smart", 7, [2.1429] * 6 + [2.1426]),            # 15/7 = 2.142857 -> 2.1429; the last: 15 - 6·2.1429 = 2.1426
    ("adamw", 3, [3.3333, 3.3333, 3.3334]),
    ("surgery", 1, [15.0]),
])
def test_an_assignments_points_are_shared_over_its_cases_and_sum_to_its_points(monkeypatch, key, n, shares):
    entries, _ = grade_one(monkeypatch, key, right(n), n)
    assert [e["max_score"] for e in entries] == shares and [e["score"] for e in entries] == shares, (
        f"minbert.classroom.grade.grade_assignment: {key} ({C.BY_KEY[key].points} points, {n} cases) must give "
        f"{shares}, got {[e['max_score'] for e in entries]}")
    assert sum(shares) == pytest.approx(C.BY_KEY[key].points, abs=1e-9)


def test_the_first_two_cases_are_visible_and_the_rest_hidden_until_the_due_date(monkeypatch):
    entries, stand_in = grade_one(monkeypatch, "attention", right(4), 4)
    assert [e["name"] for e in entries] == [
        "2. attention: case 1 (forward, x (2, 1))", "2. attention: case 2 (forward, x (2, 2))",
        "2. attention: hidden case 3 (forward, x (2, 3))", "2. attention: hidden case 4 (forward, x (2, 4))"]
    assert [e["visibility"] for e in entries] == ["visible", "visible", "after_due_date", "after_due_date"]
    assert {e["assignment"] for e in entries} == {"attention"} and {e["output"] for e in entries} == {"passed"}
    assert all(e["isolation"] == ["a separate user", "rlimits"] for e in entries)
    (template, key, sent, job, timeout, level, secrets), = stand_in.calls
    assert (template, key, job, timeout, level, secrets) == ("TEMPLATE", "attention", G.Path("/grading/attention"), 7.5,
                                                             "user+chroot", ["secret.py"]) and len(sent) == 4


def test_a_missed_case_scores_zero_with_its_message_and_the_known_mistakes_hint(monkeypatch):
    outputs = right(3)
    outputs[1] = {"y": torch.tensor([1.0, 2.0])}
    asked = []

    def recognise(key, case, got):                       # the known mistake: only this case's wrong answer
        asked.append((key, case["x"].shape, got))
        return "the scale is 1/sqrt(D)" if key == "attention" and case["x"].shape == (2, 2) and got is outputs[1] else ""
    monkeypatch.setattr(G.HINTS, "recognise", recognise)
    outputs[2] = Message("raised KeyError" + RUN)
    entries, _ = grade_one(monkeypatch, "attention", outputs, 3)
    assert [(e["score"], e["max_score"], e["output"]) for e in entries] == [
        (3.3333, 3.3333, "passed"),
        (0.0, 3.3333, f"y: max abs difference 1 at index (1,) (expected 1, got 2; {TOL}) (hint: the scale is 1/sqrt(D))"),
        (0.0, 3.3334, "raised KeyError" + RUN)], "a hint is added to a wrong answer, never to an exception's message"
    assert asked == [("attention", (2, 2), outputs[1])], "hints are looked for in wrong answers only"


def test_a_case_the_grader_cannot_compare_costs_that_case_only(monkeypatch):
    def broken(got, want):
        raise ValueError("odd tensor")
    monkeypatch.setattr(G, "compare", broken)
    entries, _ = grade_one(monkeypatch, "attention", right(2), 2)
    assert [(e["score"], e["output"]) for e in entries] == [(0.0, "the outputs could not be compared (ValueError)")] * 2


def test_a_self_check_says_so_in_every_case(monkeypatch):
    outputs = right(2)
    outputs[0] = {}
    entries, _ = grade_one(monkeypatch, "attention", outputs, 2, level="self-check")
    assert [e["output"] for e in entries] == [f"output 'y' is missing [{G.SELF_CHECK}]", f"passed [{G.SELF_CHECK}]"]


def test_an_assignment_with_intake_problems_runs_nothing_and_every_case_says_why(monkeypatch):
    entries, stand_in = grade_one(monkeypatch, "pals", right(2), 2,
                                  problems=["a changed line outside the blocks", "a syntax error at line 3"])
    assert stand_in.calls == [], "nothing may run when intake found a problem"
    assert [(e["score"], e["max_score"], e["output"], e["isolation"]) for e in entries] == [
        (0.0, 5.0, "a changed line outside the blocks | a syntax error at line 3", [])] * 2


def test_a_box_that_gave_nothing_costs_every_case_with_its_reason(monkeypatch):
    entries, _ = grade_one(monkeypatch, "pals", None, 2, why="the wall-clock limit (7.5 s) was reached")
    assert [(e["score"], e["output"]) for e in entries] == [(0.0, "the wall-clock limit (7.5 s) was reached")] * 2


def test_the_assignments_time_is_shared_over_its_cases(monkeypatch):
    clock = iter([100.0, 101.0])
    monkeypatch.setattr(G.time, "perf_counter", lambda: next(clock))
    entries, _ = grade_one(monkeypatch, "attention", right(6), 6)
    assert [e["execution_time"] for e in entries] == [0.167] * 6, "1 s over 6 cases, rounded to 3 places"


def test_a_grade_is_the_entries_with_the_salt_and_the_gates_refusals():
    g = G.Grade([{"a": 1}, {"b": 2}], salt=5, refused={"smart": ["x"]})
    assert list(g) == [{"a": 1}, {"b": 2}] and g.salt == 5 and g.refused == {"smart": ["x"]}


# ---------------------------------------------------------------------- the isolation level, the seed, the secrets

@pytest.fixture
def machine(monkeypatch):
    """Pretend this machine gives `level` (why), as root or not."""
    def set_(level, root, why="no CAP_SYS_ADMIN"):
        monkeypatch.setattr(G, "_ISOLATION", None)
        monkeypatch.setattr(sandbox, "isolation_available", lambda: (level, why))
        monkeypatch.setattr(G.os, "geteuid", lambda: 0 if root else 1000, raising=False)
    return set_


@pytest.mark.parametrize("level, root, require, got", [
    ("user+chroot", True, None, "user+chroot"),            # as root the default asks for "user+chroot"
    ("self-check", False, None, "self-check"),             # as a user the default accepts a self-check
    ("user+chroot", True, True, "user+chroot"),
    ("self-check", True, False, "self-check"),             # root without a chroot: a self-check, when asked for
    ("self-check", True, "self-check", "self-check"),
    ("namespaces", False, "namespaces", "namespaces"),
])
def test_isolation_grants_the_machines_level_when_it_meets_the_requirement(machine, level, root, require, got):
    machine(level, root)
    assert G.isolation(require) == (got, "no CAP_SYS_ADMIN")
    assert G._ISOLATION == (level, "no CAP_SYS_ADMIN"), "the machine's level is found once and kept"


@pytest.mark.parametrize("level, root, require, message", [
    ("self-check", True, None, "grade: isolation 'user+chroot' is required but this machine gives 'self-check'"),
    ("self-check", False, True, "grade: isolation 'user+chroot' is required but this machine gives 'self-check'"),
    ("user+chroot", True, "namespaces", "grade: isolation 'namespaces' is required but this machine gives 'user+chroot'"),
    ("user+chroot", True, "nope", "--require_isolation: 'nope' is not a level; choose from self-check, user+chroot, "
                                  "namespaces (weakest first)"),
    ("user+chroot", True, "user", "--require_isolation: 'user' is not a level; choose from self-check, user+chroot, "
                                  "namespaces (weakest first)"),       # the level without a chroot is gone
])
def test_isolation_refuses_below_the_required_level_with_the_reason(machine, level, root, require, message):
    machine(level, root)
    with pytest.raises(C.UserError) as e:
        G.isolation(require)
    assert str(e.value).startswith(message), str(e.value)
    if "required" in message:
        assert str(e.value) == (f"{message} (no CAP_SYS_ADMIN); grade as root on Linux (Docker's default "
                                "capabilities are enough for 'user+chroot'; Podman and CRI-O need CAP_SYS_CHROOT "
                                "added), or pass --require_isolation self-check for a grade labelled a self-check")
    else:
        assert str(e.value) == message


@pytest.mark.parametrize("level", ["user", "none"])
def test_the_command_line_refuses_a_level_that_does_not_exist_in_one_line(level, capsys, monkeypatch):
    """`--require_isolation user` (the level without a chroot, removed) is refused before anything is graded, in one
    line that names the levels there are."""
    from minbert.classroom.cli import main
    from minbert.core.errors import cli
    monkeypatch.setattr(sandbox, "isolation_available", lambda: pytest.fail("the machine was probed for a bad flag"))
    with pytest.raises(SystemExit) as e:
        cli(main, ["grade", str(C.ROOT), "--require_isolation", level])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err == (f"error: --require_isolation: {level!r} is not a level; choose from "
                                         "self-check, user+chroot, namespaces (weakest first)\n"), err


def test_isolation_asks_the_machine_once(monkeypatch):
    calls = []
    monkeypatch.setattr(G, "_ISOLATION", None)
    monkeypatch.setattr(sandbox, "isolation_available", lambda: calls.append(1) or ("namespaces", ""))
    assert G.isolation(False) == G.isolation(False) == ("namespaces", "") and calls == [1]
    monkeypatch.setattr(G, "_ISOLATION", ("user+chroot", "kept"))
    assert G.isolation(False) == ("user+chroot", "kept") and calls == [1]


def test_the_seed_is_sha256_of_the_salt_and_the_templates_python_files_in_path_order(tmp_path):
    (tmp_path / "minbert" / "sub").mkdir(parents=True)
    (tmp_path / "minbert" / "b.py").write_bytes(b"B")
    (tmp_path / "minbert" / "sub" / "a.py").write_bytes(b"A")
    (tmp_path / "minbert" / "notes.txt").write_bytes(b"not code")
    (tmp_path / "other.py").write_bytes(b"outside minbert/")
    want = int.from_bytes(hashlib.sha256(b"42" + b"B" + b"A").digest()[:6], "big")   # b.py < sub/a.py
    assert G.seed_of(tmp_path, 42) == want
    assert G.seed_of(tmp_path) == int.from_bytes(hashlib.sha256(b"0BA").digest()[:6], "big")


def test_every_solution_file_and_the_grader_are_secrets_of_the_box(tmp_path):
    graded = ["adamw.py", "bert/attention.py", "bert/layers.py", "bert/model.py", "methods/gradvac.py",
              "methods/meanshift.py", "methods/mml.py", "methods/pals.py", "methods/pcgrad.py", "methods/smart.py",
              "tasks/multitask.py"]                                   # docs/classroom.md: the files each assignment imports
    got = G.secrets_of(tmp_path)
    assert got[:2] == [tmp_path / "minbert/classroom/references.py", tmp_path / "minbert/classroom/grade.py"]
    assert sorted(got[2:]) == sorted(tmp_path / "minbert" / f for f in graded)


# ---------------------------------------------------------------------- run_child: what the box is given

@pytest.mark.parametrize("data, lines", [
    (b"a\x0cb\nc\n", ["a\x0cb", "c"]),            # a form feed or U+2028 is not a line break to Python
    ("a\u2028b\n".encode(), ["a\u2028b"]),
    (b"a\r\nb\rc", ["a", "b", "c"]),                # \r\n and \r are
    (b"a\n\n", ["a", ""]),
    (b"", []),
    (b"\xff\n", ["\ufffd"]),
])
def test_source_lines_numbers_lines_as_python_does(tmp_path, data, lines):
    (tmp_path / "x.py").write_bytes(data)
    assert G.source_lines(tmp_path / "x.py") == lines


def test_source_lines_reads_utf_8_whatever_the_machines_locale(tmp_path):
    import locale
    (tmp_path / "x.py").write_bytes("# é\n".encode())
    old = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")             # an ASCII locale, as a bare container may have
    try:
        assert G.source_lines(tmp_path / "x.py") == ["# é"]
    finally:
        locale.setlocale(locale.LC_CTYPE, old)



@pytest.fixture
def private_umask():
    """Files made private by default (umask 077), so the modes a test reads are the ones the grader set."""
    old = os.umask(0o077)
    yield
    os.umask(old)


def test_run_child_gives_the_box_its_job_folder_read_only_and_numbers_lines_as_python_does(tmp_path, monkeypatch,
                                                                                                  private_umask):
    template = tmp_path / "template"
    (template / "minbert" / "bert").mkdir(parents=True)
    (template / "minbert" / "bert" / "attention.py").write_bytes(
        b"# \xff not utf-8, \x0c a form feed\n" + FILES["minbert/bert/attention.py"][1].encode() + b"\n")
    seen = {}

    def stand_in(argv, env, box, limits, level, secrets=()):
        job = G.Path(box["job"])
        seen.update(argv=argv, env=env, box=box, limits=limits, level=level, secrets=secrets,
                    files={p.name: (p.read_bytes(), p.stat().st_mode & 0o777) for p in job.iterdir()},
                    mode=job.stat().st_mode & 0o777, inputs=torch.load(job / "inputs.pt", weights_only=True))
        where, op = b"minbert/bert/attention.py:2", b"aten::_scaled_dot_product_flash_attention_for_cpu.default"
        result = wire.MAGIC + struct.pack("=I", 2) + b"E" + bytes([19]) + b"NotImplementedError" + \
            bytes([len(where)]) + where + bytes([0]) + b"E" + bytes([6]) + b"Banned" + bytes([0, len(op)]) + op
        return sandbox.Outcome(0, b"", result, layers=["rlimits"])
    monkeypatch.setattr(sandbox, "run", stand_in)
    sent = [{"x": torch.arange(3.0)}, {"x": torch.ones(2)}]
    results, why, layers = G.run_child(template, "attention", sent, tmp_path / "jobs" / "attention", 9.0, "user+chroot",
                                        ["s"])
    assert (results, why, layers) == ([
        "not written yet: the stub at minbert/bert/attention.py:2 still raises NotImplementedError (assignment attention)",
        "called aten::_scaled_dot_product_flash_attention_for_cpu.default, which assignment attention does not allow "
        "(its list: ALLOWED.md)"], "", ["rlimits"])
    assert seen["argv"] == [sys.executable, "-I", "/box/job/child.py", "/box/template", "attention", "/box/job/inputs.pt",
                            "/box/job"]
    assert seen["env"] == {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}
    assert seen["box"] == {"template": str(template), "job": str(tmp_path / "jobs" / "attention")}
    assert seen["limits"] == sandbox.Limits(wall_s=9.0) and seen["level"] == "user+chroot" and seen["secrets"] == ["s"]
    here = G.Path(G.__file__).parent
    assert seen["mode"] == 0o755 and {k: v[1] for k, v in seen["files"].items()} == dict.fromkeys(
        ["_minbert_grader_scenarios.py", "_minbert_grader_wire.py", "_minbert_grader_fence.py", "child.py",
         "fence.json", "inputs.pt"], 0o644)
    assert seen["files"]["_minbert_grader_scenarios.py"][0] == (here / "scenarios.py").read_bytes()
    assert seen["files"]["_minbert_grader_wire.py"][0] == (here / "wire.py").read_bytes()
    assert seen["files"]["child.py"][0] == (here / "child.py").read_bytes()
    assert seen["files"]["_minbert_grader_fence.py"][0] == (here / "fence.py").read_bytes()
    a = C.BY_KEY["attention"]
    assert json.loads(seen["files"]["fence.json"][0]) == {"fence": a.fence, "ops": sorted(a.allowed_ops),
                                                          "calls": sorted(a.allowed_calls)}
    assert len(seen["inputs"]) == 2 and torch.equal(seen["inputs"][0]["x"], torch.arange(3.0))
