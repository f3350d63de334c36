"""Run reports: metrics.jsonl rewritten from the run's history, markdown tables, optional plots.

Oracles: (c) properties. matplotlib is optional at runtime (README, "Dependencies"; docs/install.md): without it
the plots are skipped with a printed note and the run carries on. That documented behaviour is
checked here by hiding the package (sys.modules[name] = None makes `import` fail).
"""

import json
import sys

import pytest

from minbert.core.report import markdown_table, plot_heads, plot_panels, write_jsonl


def test_write_jsonl_rewrites_the_whole_history(tmp_path):
    path = tmp_path / "metrics.jsonl"
    write_jsonl(path, [{"epoch": 1}, {"epoch": 2}])
    write_jsonl(path, [{"epoch": 1}, {"epoch": 2}, {"epoch": 3}])   # a resumed run redoes epoch 2..3
    assert [json.loads(x)["epoch"] for x in path.read_text().splitlines()] == [1, 2, 3], \
        "minbert.core.report.write_jsonl must replace the file with the given records, not append"


def test_markdown_table_has_header_rule_and_rows():
    assert markdown_table([{"a": 1, "b": 2}], ["a", "b"]).splitlines() == ["| a | b |", "|---|---|", "| 1 | 2 |"]


def test_plots_are_written_with_matplotlib(tmp_path):
    import matplotlib  # noqa: F401  (a dev requirement; the missing case is the next test)
    assert plot_panels(tmp_path / "c.png", [1, 2], {"loss": {"sst": [1.0, 0.5]}})
    assert (tmp_path / "c.png").stat().st_size > 1000


@pytest.mark.parametrize("plot", ["curves", "heads"])
def test_without_matplotlib_plots_are_skipped_with_a_note(tmp_path, monkeypatch, capsys, plot, plots):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    path = tmp_path / f"{plot}.png"
    if plot == "curves":
        written = plot_panels(path, [1], {"loss": {"sst": [1.0]}})
    else:
        written = plot_heads(path, [(1, 4)], [], 4)
    assert written is False and not path.exists(), f"without matplotlib, {plot}.png must be skipped, not half-written"
    assert "matplotlib is not installed" in capsys.readouterr().out, "the skipped plot must be announced"
