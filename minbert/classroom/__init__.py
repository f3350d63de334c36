"""classroom: the course edition, instructor-only (never in the student copy). The top layer.
One line per file, the protocol and its threat model: docs/classroom.md.
"""
