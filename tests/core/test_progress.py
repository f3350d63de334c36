"""Progress in logs (minbert/core/progress.py).

Oracles: (c) properties. With stdout piped (pytest captures it: not a terminal) a real run prints one step record
line per --log_every steps, counted against the number of steps the run takes; a fake clock shows the time
rule (--log_seconds) and the ETA from the recent rate on their own. (The thread count that replaced the
busy-machine warning: test_device.py. The step records' numbers: tests/run/test_step_log.py.)
"""

import math

from test_run_dir import run
from test_train_multitask import setup  # noqa: F401  (fixture)


def progress_lines(text):
    return [line for line in text.splitlines() if line.startswith("epoch ") and " step " in line]


def test_piped_run_prints_a_step_record_line_every_n_steps(setup, tmp_path, capsys):
    run(setup, tmp_path / "r", "--epochs", "2", "--log_every", "7", "--head_lr", "1e-2")
    out = capsys.readouterr().out
    steps = math.ceil(3 * 24 / 4)   # 72 training examples, batch 4: 18 steps per epoch, 36 in the run
    records = [line for line in out.splitlines() if line.startswith("step ")]
    assert [int(r.split()[1]) for r in records] == [7, 14, 21, 28, 35], \
        f"minbert.run.step_log: with --log_every 7, expected a line at steps 7, 14, ..., 35 of 36, got {records}"
    for part in ("(epoch 2)", "| loss ", "sst ", "| lr ", "heads", "| grad norm ", " ex/s"):
        assert part in records[-1], f"a step record line must show {part!r}: {records[-1]!r}"
    lines = progress_lines(out)   # the progress lines: start, first step, last step of each epoch (fast steps)
    assert len(lines) == 6 and f"step {steps}/{steps}" in lines[-1] and "ETA" in lines[-1], lines


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

    bar = progress.LogBar(range(10), epoch=1, epochs=1, total=10, seconds=25, stream=Sink(),
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

    bar = progress.LogBar(steps(), epoch=1, epochs=2, total=956, initial=86, seconds=30, stream=Sink(),
                          clock=lambda: 0.0)
    list(bar)
    assert seen[0] == ["epoch 1/2 step 86/956 (9%) | starting; a line after the first step, then every 30 s"], \
        f"minbert.core.progress.LogBar: expected one start line before the first step, got {seen[0]}"


class Sink:
    def __init__(self):
        self.lines = []

    def write(self, text):
        self.lines.extend(x for x in text.splitlines() if x)

    def flush(self):
        pass


def test_the_eta_follows_the_rate_of_the_last_steps_not_the_average_since_the_start():
    """100 steps at 1 s, then the machine gets busy: 3 s a step. At step 150 of 200 the 50 steps left take 150 s at
    the recent rate (the last RATE_WINDOW = 50 steps were all 3 s); the average since the start (250 s / 150 steps)
    would say 83 s. The next epoch's 200 steps add 600 s to the run's ETA."""
    from minbert.core import progress
    assert progress.RATE_WINDOW == 50
    durations = [1.0] * 100 + [3.0] * 100
    times = iter([0.0] + [sum(durations[:i + 1]) for i in range(200)])
    sink = Sink()
    # lines: the start, step 1 (t = 1 s), then by time: 249 s later, t = 250 s, is step 150 (100 x 1 s + 50 x 3 s)
    bar = progress.LogBar(range(150), epoch=1, epochs=2, total=200, seconds=249, stream=sink, clock=lambda: next(times))
    list(bar)
    assert sink.lines[-1].startswith("epoch 1/2 step 150/200"), sink.lines
    assert "ETA epoch 2m30s, run 12m30s" in sink.lines[-1], \
        (f"minbert.core.progress.LogBar: after 50 steps at 3 s, 50 steps left must be ETA 2m30s (the recent rate), "
         f"and the run 2m30s + 200 x 3 s = 12m30s; got {sink.lines[-1]!r}")


def test_recent_rate_counts_only_training_time_and_the_window():
    from minbert.core import progress
    rate = progress.RecentRate(window=3)
    rate.restart(0.0)
    for now, examples in ((1.0, 10), (2.0, 10), (3.0, 10)):
        rate.add(now, examples)
    rate.restart(100.0)                    # an evaluation between epochs: not training time
    rate.add(104.0, 40)                    # a slow step: the window now holds 1 s, 1 s, 4 s
    assert rate.steps_per_s() == 3 / 6 and rate.examples_per_s() == 60 / 6, \
        (f"minbert.core.progress.RecentRate: the last 3 steps took 1, 1, 4 s for 10, 10, 40 examples: expected "
         f"0.5 steps/s and 10 ex/s, got {rate.steps_per_s()}, {rate.examples_per_s()}")


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
