"""Both scripts' main() under torchrun: no phase is abortable (minbert/core/interrupt.py; the loops ask every
rank's stop flag through minbert/run/distributed.py, tests/run/test_distributed.py). main() runs before the process
group exists (experiment() joins it), so it must read torchrun's environment, not the group's size."""

import pytest

import train_mml
import train_multitask
from minbert.core import interrupt


@pytest.mark.parametrize("script, argv", [
    (train_multitask, ["--option", "finetune"]),
    (train_mml, ["--task", "RTE", "--method", "bert"]),
])
def test_main_under_torchrun_makes_no_phase_abortable(script, argv, monkeypatch, tmp_path):
    seen = {}

    class Recorder(interrupt.StopSignal):
        def __init__(self, abortable=True):
            super().__init__(abortable)
            seen.update(abortable=abortable)
    monkeypatch.setattr(interrupt, "StopSignal", Recorder)
    monkeypatch.setattr(script, "experiment", lambda args, stop: None)   # setup would join a process group
    monkeypatch.setenv("RANK", "0")          # what torchrun sets before the script starts
    monkeypatch.setenv("WORLD_SIZE", "2")
    script.main(argv + ["--out_dir", str(tmp_path / "run")])
    assert seen["abortable"] is False, (
        f"{script.__name__}.main() under torchrun (RANK, WORLD_SIZE set) made an abortable StopSignal: "
        "a Ctrl-C in setup or evaluation would stop one rank at once while the others wait in a collective; "
        "decide it from distributed.launched(), not world_size() (the process group does not exist yet)")
