"""The suite's own environment (tests/conftest.py): whatever the caller's shell sets, a test runs torch on one
thread, sees neither HF_HUB_OFFLINE nor torchrun's variables, and the processes it starts inherit the same.

So `pytest -n auto` on a many-core machine runs near one thread per worker (not one per core in every worker), and
no test's numbers or messages depend on the shell it was started from.
"""

import os
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
CALLER = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "4", "RANK": "1", "WORLD_SIZE": "2"}


def test_one_thread_no_offline_flag_no_torchrun_variables():
    assert torch.get_num_threads() == 1, \
        f"tests/conftest.py: a test must run torch on 1 thread, got {torch.get_num_threads()}"
    assert os.environ.get("OMP_NUM_THREADS") == "1", "tests/conftest.py: OMP_NUM_THREADS must be 1 for the children"
    leaked = [name for name in CALLER if name != "OMP_NUM_THREADS" and name in os.environ]
    assert not leaked, f"tests/conftest.py: the caller's {leaked} must be cleared before any test runs"
    child = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                           capture_output=True, text=True, timeout=120)
    assert child.stdout.strip() == "1", f"a process a test starts must run torch on 1 thread: {child.stdout!r}"


def test_the_callers_shell_changes_nothing_a_test_sees():
    """The test above, in a pytest started from a shell that sets the offline flag, 4 threads and torchrun's rank."""
    test = f"{Path(__file__).relative_to(ROOT)}::{test_one_thread_no_offline_flag_no_torchrun_variables.__name__}"
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test], cwd=ROOT,
                       env={**os.environ, **CALLER}, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"with {CALLER} set by the caller, a test saw them:\n{p.stdout[-2000:]}"
