"""Run reports shared by the training scripts: one JSON line per evaluation, a markdown
summary table, and a PNG of the curves when matplotlib is installed (an optional dependency:
without it the scripts print a one-line note and carry on)."""

import json
from pathlib import Path

from .model import atomic_write


def write_jsonl(path, records: list[dict]) -> None:
    """Rewrite the whole file, one JSON line per record, atomically. The scripts call it with the
    history kept in their checkpoints, so after any crash and resume the file matches the run
    exactly (appending would repeat the lines of an epoch that was redone)."""
    atomic_write(Path(path), lambda tmp: Path(tmp).write_text("".join(json.dumps(r) + "\n" for r in records)))


def markdown_table(rows: list[dict], columns: list[str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def plot_panels(path, x: list, panels: dict[str, dict[str, list]], xlabel: str = "epoch") -> bool:
    """One subplot per panel {title: {label: y values}}; returns False when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")   # files only, no window
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed: no {path} (pip install matplotlib for the plot)")
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for ax, (title, lines) in zip(axes[0], panels.items()):
        for label, y in lines.items():
            ax.plot(x[: len(y)], y, marker="o", label=label)
        ax.set(xlabel=xlabel, title=title)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True
