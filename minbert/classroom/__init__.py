"""classroom: the course edition, instructor-only (never in the student copy). The top layer.

In reading order: the rubric, the markers and the student copy (assignments) and the commands (cli); intake and the
gate (submission, gate); the cases and the glue that calls a graded function (cases, scenarios); the box (sandbox,
box_root, cleanup); the child and its runtime fence (child, fence, allowlists, allowlist_recording); the parent's
verdicts (grade, wire, results, hints, references); Gradescope's zip and `classroom check` (autograder).
One line per file, the protocol and its threat model: docs/classroom.md.
"""
