"""Device choice, `--amp auto` and `--threads`: fast and safe on every machine, decided from capability queries.

Oracle: (c) the decision table in minbert/core/device.py's docstring, with the capability queries
mocked (torch.cuda.is_bf16_supported, torch.cpu.get_capabilities), so every branch is checked
on any machine: CUDA with and without bf16, CPU with AMX, with AVX512-BF16, plain AVX2, and MPS.
Threads: the free cores worked out by hand from made-up /proc/loadavg lines (no timing, no real load).
"""

import warnings

import pytest
import torch

from minbert.core import device as dev
from minbert.core.errors import UserError

CPU = torch.device("cpu")


def cpu_caps(monkeypatch, **caps):
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"avx2": True, **caps})


@pytest.mark.parametrize("caps, want", [
    ({"amx_bf16": True, "amx_tile": True}, "bf16"),
    ({"avx512_bf16": True}, "bf16"),
    ({}, "off"),                       # AVX2 only: bf16 is emulated, ~30x slower than fp32
])
def test_auto_on_cpu_uses_bf16_only_where_it_is_native(monkeypatch, caps, want):
    cpu_caps(monkeypatch, **caps)
    amp, reason = dev.resolve_amp("auto", CPU)
    assert amp == want, f"minbert.core.device.resolve_amp('auto', cpu) with {caps or 'AVX2 only'}: expected {want}, got {amp}"
    assert reason.startswith("auto:"), "the reason printed at start must say the choice was automatic"


@pytest.mark.parametrize("bf16, want", [(True, "bf16"), (False, "fp16")])
def test_auto_on_cuda_prefers_bf16_then_fp16(monkeypatch, bf16, want):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a, **k: "Mock GPU")
    amp, reason = dev.resolve_amp("auto", torch.device("cuda"))
    assert amp == want, f"resolve_amp('auto', cuda) with bf16 support {bf16}: expected {want}, got {amp}"
    assert "Mock GPU" in reason


def test_auto_on_mps_is_off():
    assert dev.resolve_amp("auto", torch.device("mps"))[0] == "off"


def test_forced_bf16_on_a_cpu_without_native_bf16_runs_but_warns(monkeypatch):
    cpu_caps(monkeypatch)
    with pytest.warns(UserWarning, match="30x SLOWER.*--amp off"):
        amp, _ = dev.resolve_amp("bf16", CPU)
    assert amp == "bf16", "an explicit --amp bf16 must still be honoured"


def test_forced_bf16_on_a_native_bf16_cpu_is_silent(monkeypatch):
    cpu_caps(monkeypatch, avx512_bf16=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dev.resolve_amp("bf16", CPU) == ("bf16", "as requested")


@pytest.mark.parametrize("caps, use", [({}, "--amp off"), ({"amx_bf16": True}, "--amp bf16")])
def test_fp16_on_a_cpu_is_refused_naming_what_to_use(monkeypatch, caps, use):
    """--amp fp16 on a CPU ran ~20x slower than fp32 and was accepted: now one line, naming bf16 where the CPU has
    it natively and off (fp32) elsewhere. On a GPU fp16 stays what it was."""
    cpu_caps(monkeypatch, **caps)
    with pytest.raises(UserError) as refused:
        dev.resolve_amp("fp16", CPU)
    message = str(refused.value)
    assert message.startswith("--amp fp16 on a CPU") and use in message and "\n" not in message, \
        f"minbert.core.device.resolve_amp: --amp fp16 on a CPU ({caps or 'AVX2 only'}) must say to use {use}: {message!r}"
    assert dev.resolve_amp("fp16", torch.device("cuda")) == ("fp16", "as requested")


def test_fp16_on_a_cpu_stops_the_script_before_it_loads_anything(tmp_path, capsys):
    import train_mml
    from minbert.core.errors import cli
    with pytest.raises(SystemExit) as stop:
        cli(train_mml.main, ["--task", "RTE", "--device", "cpu", "--amp", "fp16", "--out_dir", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert stop.value.code != 0 and "--amp fp16 on a CPU" in err and "Traceback" not in err, err
    assert not (tmp_path / "r").exists(), "a refused run must leave no folder behind"


@pytest.mark.parametrize("name", ["gpu", "cuda:x", "tpu"])
def test_bad_device_names_are_user_errors(name):
    with pytest.raises(UserError, match=f"--device {name}"):
        dev.pick_device(name)


# ---------------------------------------------------------------------------------------------- threads
@pytest.fixture
def keep_threads():
    """set_threads changes this process's torch threads: put them back after the test."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("loadavg, average, cores, want", [
    ("0.60 0.50 0.40 1/87 4242", 0.6, 2, 2),     # the average lags a pip install; only this process runs: 2 free
    ("1.10 0.90 0.50 2/90 4242", 1.1, 2, 1),     # one other job runs: 1 core free
    ("2.60 2.00 1.50 3/87 4242", 2.6, 2, 1),     # both cores busy: still 1 thread, never 0
    ("0.40 0.40 0.40 3/87 4242", 0.4, 2, 2),     # two threads running for an instant, average 0.4: 2 free
    ("12.00 11.0 10.0 13/300 42", 12.0, 16, 4),  # 12 of 16 cores busy: the 4 left
    ("0.00 0.00 0.00 1/50 42", 0.0, 4, 4),       # idle 4-core machine: all 4
])
def test_threads_are_the_cores_left_free_by_the_load(tmp_path, monkeypatch, loadavg, average, cores, want):
    (tmp_path / "loadavg").write_text(loadavg + "\n")
    monkeypatch.setattr(dev.os, "getloadavg", lambda: (average, average, average))
    load = dev.current_load(str(tmp_path / "loadavg"), wait=0)
    got = dev.choose_threads(cores, load)
    assert got == want, (f"minbert.core.device.choose_threads: /proc/loadavg {loadavg!r} on {cores} cores "
                         f"(current_load {load}) should give {want} thread(s), got {got}")


def test_load_is_the_average_where_there_is_no_proc_loadavg(tmp_path, monkeypatch):
    monkeypatch.setattr(dev.os, "getloadavg", lambda: (1.3, 1.0, 1.0))
    assert dev.current_load(str(tmp_path / "absent"), wait=0) == 1.3, "without /proc/loadavg: the 1-minute average"
    assert dev.choose_threads(4, None) == 4, "no load average at all (Windows): every core"


def test_explicit_threads_flag_wins_over_omp_num_threads_and_the_load(keep_threads, capsys):
    line = dev.set_threads(3, CPU, environ={"OMP_NUM_THREADS": "1"}, load=0.0, cores=4)
    assert torch.get_num_threads() == 3, f"--threads 3 must set torch's threads to 3, got {torch.get_num_threads()}"
    assert line == "threads: 3 (--threads)", line


def test_omp_num_threads_is_left_as_the_user_set_it(keep_threads, monkeypatch):
    torch.set_num_threads(2)   # what torch read from OMP_NUM_THREADS=2 at import
    monkeypatch.setattr(dev, "current_load", lambda: pytest.fail("OMP_NUM_THREADS is set: the load must not decide"))
    line = dev.set_threads(0, CPU, environ={"OMP_NUM_THREADS": "2"}, cores=2)
    assert torch.get_num_threads() == 2, "with OMP_NUM_THREADS set and no --threads, torch's threads must stay"
    assert line == "threads: 2 (OMP_NUM_THREADS=2)", line


def test_unset_threads_take_the_free_cores_and_say_so_in_one_line(keep_threads, capsys):
    line = dev.set_threads(0, CPU, environ={}, load=1.0, cores=2)
    printed = capsys.readouterr().out.splitlines()
    assert torch.get_num_threads() == 1, "one of 2 cores busy: torch must run 1 thread"
    assert printed == [line] == ["threads: 1 of 2 cores (other jobs keep 1.0 busy now; --threads N to choose: more "
                                 "than the free cores can run several times slower)"], \
        f"minbert.core.device.set_threads must print exactly one line naming the count and the flag: {printed}"


@pytest.mark.parametrize("flag, resumed, then", [
    (2, 0, ""), (0, 2, "; a resume on another count is not bit for bit")])
def test_more_threads_than_free_cores_are_named_slower_with_the_count_to_use(keep_threads, flag, resumed, then):
    """A resume with --threads 2 on 2 cores at load ~4 ran 3-4x slower than with 1. The line must say so and name
    the count the load leaves free (choose_threads: 1 here), whether the 2 came from --threads or from the resumed
    run; and say nothing of it where the threads fit (load 0)."""
    line = dev.set_threads(flag, CPU, environ={}, load=3.9, cores=2, resumed=resumed)
    assert line.endswith("; other jobs keep 3.9 of 2 cores busy now: 2 threads can run several times slower than "
                         f"--threads 1{then}"), f"minbert.core.device.set_threads on a busy machine: {line!r}"
    quiet = dev.set_threads(flag, CPU, environ={}, load=0.0, cores=2, resumed=resumed)
    assert "slower" not in quiet, f"2 threads on 2 idle cores: no warning expected, got {quiet!r}"


def test_a_gpu_run_without_threads_keeps_torch_default_silently(keep_threads, capsys):
    torch.set_num_threads(2)
    assert dev.set_threads(0, torch.device("cuda"), environ={}, load=1.9, cores=2) is None
    assert torch.get_num_threads() == 2 and capsys.readouterr().out == "", "a GPU run must not change CPU threads"


def test_training_script_prints_the_threads_line_once(keep_threads, monkeypatch, capsys, tmp_path):
    """Through train_multitask.main: OMP_NUM_THREADS unset, one core of two busy -> one line, one thread."""
    from test_run_dir import run
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(dev, "current_load", lambda: 1.0)
    monkeypatch.setattr(dev, "usable_cores", lambda: 2)
    run(_tiny(tmp_path), tmp_path / "r", "--epochs", "1")
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("threads:")]
    assert lines == ["threads: 1 of 2 cores (other jobs keep 1.0 busy now; --threads N to choose: more than the free "
                     "cores can run several times slower)"], \
        f"train_multitask.py must say how many threads it chose, once: {lines}"
    assert torch.get_num_threads() == 1, "train_multitask.py must run on the 1 free core"


def test_a_resume_keeps_the_thread_count_its_run_started_with(keep_threads, monkeypatch, capsys, tmp_path):
    """A CPU's sums depend on how many threads split them: a run that started on 1 thread and is resumed on an idle
    machine chose 2 and its predictions differed from the uninterrupted run's. The count is recorded in the
    checkpoint (args.threads) and a resume without --threads or OMP_NUM_THREADS takes it back, whatever the load."""
    from test_run_dir import run
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(dev, "usable_cores", lambda: 2)
    monkeypatch.setattr(dev, "current_load", lambda: 1.0)                 # started beside another job: 1 thread
    setup = _tiny(tmp_path)
    run(setup, tmp_path / "r", "--epochs", "1", "--keep_resume_state")
    capsys.readouterr()
    monkeypatch.setattr(dev, "current_load", lambda: 0.0)                 # resumed on an idle machine
    run(setup, tmp_path / "r", "--epochs", "1", "--resume", str(tmp_path / "r" / "last.pt"))
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("threads:")]
    assert lines == ["threads: 1 (as the run it resumes, which then continues exactly; --threads N to choose)"], \
        f"a resume must keep the thread count its run started with: {lines}"
    line = dev.set_threads(2, CPU, environ={}, resumed=1, load=0.0, cores=2)
    assert line == "threads: 2 (--threads)", "an explicit --threads still wins over the resumed count"


def _tiny(tmp_path):
    from conftest import save_tiny_model, write_task_files
    data = tmp_path / "data"
    data.mkdir()
    write_task_files(data)
    return data, save_tiny_model(tmp_path / "model")


def test_the_load_is_the_busiest_of_the_samples_capped_by_the_average(tmp_path, monkeypatch):
    """current_load reads /proc/loadavg `samples` times, `wait` s apart, and takes the MOST threads running at any
    read (less this process), capped by the 1-minute average. One read alone sees the other jobs only when they happen
    to be on a core at that instant; the average alone lags a minute. Here a fake /proc/loadavg changes at every
    (fake) sleep: the running counts 1, 3, 2, 1, 2 (this process among them) give 2 other threads at the busiest read.
    The first, the last, the mean or a count that keeps this process would each give another number."""
    path = tmp_path / "loadavg"
    running = iter([1, 3, 2, 1, 2])
    path.write_text(f"2.60 2.00 1.50 {next(running)}/87 4242\n")
    sleeps = []

    def fake_sleep(seconds):   # the next sample's content appears while current_load waits
        sleeps.append(seconds)
        path.write_text(f"2.60 2.00 1.50 {next(running)}/87 4242\n")

    monkeypatch.setattr(dev.time, "sleep", fake_sleep)
    monkeypatch.setattr(dev.os, "getloadavg", lambda: (2.6, 2.0, 1.5))
    load = dev.current_load(str(path), samples=5, wait=0.05)
    assert sleeps == [0.05] * 4, f"minbert.core.device.current_load: 5 samples need 4 waits of 0.05 s, got {sleeps}"
    assert load == 2.0, (f"minbert.core.device.current_load: samples of 1, 3, 2, 1, 2 running threads (this process "
                         f"among them) and a 1-minute average of 2.6 must give 2.0 (the busiest sample), got {load}")
    monkeypatch.setattr(dev.os, "getloadavg", lambda: (0.7, 0.5, 0.5))   # the busiest sample above the average
    running = iter([3, 3, 3, 3, 3])
    path.write_text(f"0.70 0.50 0.50 {next(running)}/87 4242\n")
    assert dev.current_load(str(path), samples=5, wait=0.05) == 0.7, \
        "minbert.core.device.current_load: the load is capped by the 1-minute average (a burst of threads is brief)"
