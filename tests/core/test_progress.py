"""Progress in logs (minbert/core/progress.py).

Oracles: (c) properties. With stdout piped (pytest captures it: not a terminal) a real run prints one progress
line per --log_every steps, counted against the number of steps the run takes; a fake clock shows the time
rule (--log_seconds) on its own. (The thread count that replaced the busy-machine warning: test_device.py.)
"""

import math

from test_run_dir import run
from test_train_multitask import setup  # noqa: F401  (fixture)


def progress_lines(text):
    return [line for line in text.splitlines() if line.startswith("epoch ") and " step " in line]


def test_piped_run_prints_a_progress_line_every_n_steps(setup, tmp_path, capsys):
    run(setup, tmp_path / "r", "--epochs", "2", "--log_every", "3")
    lines = progress_lines(capsys.readouterr().out)
    steps = math.ceil(3 * 24 / 4)   # 72 training examples, batch 4: 18 steps per epoch
    # per epoch: the start, step 1, every 3rd step (3, 6, ..., 18) -> 2 + 6 lines
    assert len(lines) == 2 * (2 + steps // 3), \
        f"minbert.core.progress: with stdout piped and --log_every 3, expected {2 * (2 + steps // 3)} lines, got {lines}"
    last = lines[-1]
    for part in ("epoch 2/2", f"step {steps}/{steps}", "ex/s", "ETA", "sst ", "para ", "sts "):
        assert part in last, f"a progress line must show {part!r}: {last!r}"


def test_piped_run_with_default_flags_shows_each_epoch_start_and_end(setup, tmp_path, capsys, monkeypatch):
    """Default: by time only (every 30 s), plus the start, the first and the last step of each epoch, so even a
    short run shows it is alive. The clock is frozen, so a slow machine's 30 s never add a line here (the time rule
    has its own test below)."""
    from minbert.core import progress
    init = progress.LogBar.__init__
    monkeypatch.setattr(progress.LogBar, "__init__", lambda self, *a, **k: init(self, *a, **{**k, "clock": lambda: 0.0}))
    run(setup, tmp_path / "r", "--epochs", "2")
    lines = progress_lines(capsys.readouterr().out)
    assert [line.split(" | ")[0] for line in lines] == [
        "epoch 1/2 step 0/18 (0%)", "epoch 1/2 step 1/18 (6%)", "epoch 1/2 step 18/18 (100%)",
        "epoch 2/2 step 0/18 (0%)", "epoch 2/2 step 1/18 (6%)", "epoch 2/2 step 18/18 (100%)"], \
        f"minbert.core.progress: with stdout piped, a run must print progress lines; got {lines}"


def test_time_rule_prints_when_log_seconds_have_passed():
    from minbert.core import progress
    t = iter(range(0, 1000, 10))   # every step takes 10 fake seconds
    lines = []

    class Sink:
        def write(self, text):
            lines.extend(x for x in text.splitlines() if x)

        def flush(self):
            pass

    bar = progress.LogBar(range(10), epoch=1, epochs=1, total=10, every=0, seconds=25, stream=Sink(),
                          clock=lambda: next(t))
    assert list(bar) == list(range(10)), "LogBar must yield every item"
    # the start, after step 1, then whenever 25 s passed since the last line, and at the last step
    assert len(lines) == bar.lines == 5, \
        f"expected lines at the start and after steps 1, 4, 7 (25 s later) and 10 (the last): got {lines}"
    assert "ETA epoch 0m00s" in lines[-1]


def test_a_line_is_printed_as_the_epoch_starts_before_the_first_step():
    """The first step pays one-off setup (and the model load is just before it): a log must show the loop has
    begun before that step runs, not only after it (a run looked hung for a minute)."""
    from minbert.core import progress
    lines, seen = [], []

    class Sink:
        def write(self, text):
            lines.extend(x for x in text.splitlines() if x)

        def flush(self):
            pass

    def steps():
        for i in range(86, 90):
            seen.append(list(lines))   # what the log held when step i began
            yield i

    bar = progress.LogBar(steps(), epoch=1, epochs=2, total=956, initial=86, every=0, seconds=30, stream=Sink(),
                          clock=lambda: 0.0)
    list(bar)
    assert seen[0] == ["epoch 1/2 step 86/956 (9%) | starting; a line after the first step, then every 30 s"], \
        f"minbert.core.progress.LogBar: expected one start line before the first step, got {seen[0]}"


def test_log_epoch_rewrites_metrics_jsonl_only_where_asked(tmp_path, capsys):
    import json
    from minbert.core import progress
    history = [{"epoch": 1, "overall": 0.5}, {"epoch": 2, "overall": 0.6}]
    progress.log_epoch(history, tmp_path / "rank1", write=False)
    assert not (tmp_path / "rank1").exists(), "log_epoch(write=False) must write no file (ranks other than 0)"
    progress.log_epoch(history, tmp_path)
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x) for x in lines] == history, "log_epoch must rewrite metrics.jsonl with every record"
    assert str(history[-1]) in capsys.readouterr().out, "log_epoch must print the last record"


def test_show_rounds_floats_to_three_places():
    from minbert.core import progress
    bar = progress.LogBar(range(1), epoch=1, epochs=1, total=1)
    progress.show(bar, loss=1.23456, active=3, **{"ex/s": "12"})
    assert bar.postfix == {"loss": "1.235", "active": 3, "ex/s": "12"}, bar.postfix
