"""What a grade prints and writes: the table, the isolation line, and Gradescope's results.json."""

import json
from pathlib import Path

from minbert.classroom.assignments import ASSIGNMENTS
from minbert.core.atomic import atomic_write

def table(entries: list[dict]) -> str:
    lines, total, maximum = [f"{'assignment':<14} {'points':>8}  first failing check"], 0.0, 0.0
    for a in ASSIGNMENTS:
        mine = [e for e in entries if e["assignment"] == a.key]
        if not mine:
            continue
        got, most = sum(e["score"] for e in mine), sum(e["max_score"] for e in mine)
        total, maximum = total + got, maximum + most
        failing = next((e["output"] for e in mine if e["score"] < e["max_score"]), "")
        lines.append(f"{ASSIGNMENTS.index(a) + 1:>2}. {a.key:<10} {got:>5.1f} / {most:<4g} {failing[:300]}")
    lines.append(f"{'total':<14} {total:>5.1f} / {maximum:g}")
    lines.append(isolation_line(entries))
    if hasattr(entries, "salt"):
        lines.append(f"salt: {entries.salt} (instructor only: a regrade with --salt {entries.salt} "
                     "draws the same cases)")
        lines.append(refusals_text(entries.refused))
    return "\n".join(lines)


def refusals_text(refused: dict) -> str:
    """The gate's refusals, per assignment (each also fails the cases that reach its block, in the student's words)."""
    hits = [f"  {k}: {line}" for k, lines in refused.items() for line in lines]
    return "\n".join(["gate: refused blocks (each scores 0 where its function is graded):", *hits]) if hits else \
        "gate: no solution block was refused"


def isolation_line(entries: list[dict]) -> str:
    """How the submission was run: the sandbox's layers, or that the grade is only a self-check."""
    layers = next((e["isolation"] for e in entries if e.get("isolation")), None)
    if layers:
        return "isolation: " + ", ".join(layers)
    if any("[self-check" in e["output"] for e in entries):
        return "isolation: none on this machine; this grade is a self-check, not authoritative"
    return "isolation: no code was run"


def results_json(entries: list[dict], message: str = "") -> dict:
    """Gradescope's results.json: score, tests (name, score, max_score, output, visibility), execution_time."""
    tests = [{k: e[k] for k in ("name", "score", "max_score", "output", "visibility", "execution_time")}
             for e in entries]
    report = {"score": round(sum(e["score"] for e in entries), 4),
              "execution_time": round(sum(e["execution_time"] for e in entries), 3),
              "output": (message or f"{len(tests)} cases; hidden ones show after the due date")
              + f" ({isolation_line(entries)})", "tests": tests}
    if hasattr(entries, "salt"):           # instructor only: Gradescope never shows a hidden test to students
        report["tests"] = tests + [{"name": "instructor only: salt and the gate's refusals", "score": 0.0,
                                    "max_score": 0.0, "visibility": "hidden", "execution_time": 0.0,
                                    "output": f"salt {entries.salt}\n{refusals_text(entries.refused)}"}]
        report["extra_data"] = {"salt": entries.salt, "refused": entries.refused}
    return report


def write_json(path: Path, data: dict):
    """Atomically: a reader sees the old file or the whole new one, never a part (the grader alone writes it)."""
    text = json.dumps(data, indent=2) + "\n"
    atomic_write(path, lambda tmp: Path(tmp).write_text(text))
