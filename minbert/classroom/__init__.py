"""classroom: the course edition, instructor-only (never in the student copy). The top layer.

    assignments.py the rubric (ASSIGNMENTS), the solution markers, stripping, the student copy and its README
    cli.py         python -m minbert classroom student | grade | autograder | check | allowlists
    submission.py  only the graded files count: find them, check them against the template, lay them over it
    gate.py        what a solution block may name, read before it runs (the student copy's tests/gate.py too)
    cases.py       the cases, drawn per submission in the parent
    scenarios.py   the glue that calls a graded function (run by the parent and by the child)
    sandbox.py     the child's box: namespaces, a whitelist root, a fresh user, one process, rlimits, a deadline
    cleanup.py     a grade's cleanup whatever ends it (a SIGKILLed one's by the next): no recursion, signals as Ctrl-C
    child.py       the child process: imports the submission, runs the cases, saves the outputs
    fence.py       the runtime fence in the child: every operator and torch call checked against the allow-lists
    allowlists.py  the allow-lists: one vocabulary for the fence and the gate, ALLOWED.md, the review of each record
    allowlist_recording.py  each record's own entries, recorded in the child, into allowlists_recorded.json
    grade.py       the parent: one child per assignment, references, comparison, points per case
    results.py     the grade table, the isolation line, Gradescope's results.json
    hints.py       the usual mistakes, recognised by computing them
    references.py  independent written-out references (hints and the instructor's tests)
    autograder.py  Gradescope's zip and entry point, `classroom check`, the exploits

The guide, the protocol and its threat model: docs/classroom.md.
"""
