"""Run reports shared by the training scripts: one JSON line per evaluation, a markdown
summary table, and a PNG of the curves when matplotlib is installed (an optional dependency:
without it the scripts print a one-line note and carry on)."""

import json
from pathlib import Path

from minbert.core.atomic import atomic_write


def write_jsonl(path, records: list[dict]) -> None:
    """Rewrite the whole file atomically, one JSON line per record: the scripts pass the history their checkpoints
    keep, so after a crash and resume the file matches the run (appending would repeat a redone epoch's lines)."""
    atomic_write(Path(path), lambda tmp: Path(tmp).write_text("".join(json.dumps(r) + "\n" for r in records)))


def markdown_table(rows: list[dict], columns: list[str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def pyplot(path):
    """matplotlib.pyplot for writing `path` (no window), or None with a note when matplotlib is not installed:
    the plots are optional, and their numbers are in the run's metrics files."""
    try:
        import matplotlib
        matplotlib.use("Agg")   # files only, no window
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed: no {path} (pip install matplotlib for the plot)")
        return None
    return plt


def plot_panels(path, x: list, panels: dict[str, dict[str, list]]) -> bool:
    """One subplot per panel {title: {label: y values}} over the epochs `x`; False when matplotlib is missing."""
    plt = pyplot(path)
    if plt is None:
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for ax, (title, lines) in zip(axes[0], panels.items()):
        for label, y in lines.items():
            ax.plot(x[: len(y)], y, marker="o", label=label)
        ax.set(xlabel="epoch", title=title)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def plot_heads(path, trace, events, num_heads) -> bool:
    """MML's Fig. 2: active heads per step with elimination events, and kept vs eliminated averages."""
    plt = pyplot(path)
    if plt is None:
        return False
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.step([0] + [s for s, _ in trace], [num_heads] + [n for _, n in trace], where="post")
    for e in events:
        a.axvline(e["step"], color="r", ls=":", lw=1)
    a.set(xlabel="step", ylabel="active heads Σβ", title="active heads (red: elimination)")
    for i, e in enumerate(events):   # one column per event, labelled by its step
        b.scatter([i] * len(e["kept_moving_avg"]), e["kept_moving_avg"], c="g", s=8, label="kept" if i == 0 else None)
        b.scatter([i] * len(e["eliminated_moving_avg"]), e["eliminated_moving_avg"], c="r", s=8,
                  label="eliminated" if i == 0 else None)
    b.set(xlabel="elimination event (step)", ylabel="moving-average loss a_j", title="heads at each event")
    if events:
        b.set_xticks(range(len(events)), [str(e["step"]) for e in events])
        b.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True
