"""The instructor's grader for the classroom edition (never in the student copy).

    submission.py  only the graded files count: find them, check them against the template, banned calls
    cases.py       the cases, drawn per submission in the parent
    scenarios.py   the glue that calls a graded function (run by the parent and by the child)
    child.py       the child process: imports the submission, runs the cases, saves the outputs
    grade.py       the parent: one child per assignment, references, comparison, points per case
    hints.py       the usual mistakes, recognised by computing them
    references.py  independent written-out references (hints and the instructor's tests)
    autograder.py  Gradescope's zip and entry point, `classroom check`, the exploits

The protocol and its threat model are in README.md ("Assignments: the classroom edition").
"""
