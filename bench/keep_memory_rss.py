"""How much of a freed 64 MB tensor goes back to the OS, with glibc's defaults and with keep_memory.

A measurement, not a test: RSS after a free is the allocator's and the kernel's business and differs from
machine to machine (tests/run/test_fast_paths.py grades what minbert.core.device.keep_freed_memory asks glibc for).
Run each setting in a fresh process: a heap that kept a block earlier serves the next one from it.

    python bench/keep_memory_rss.py          # both settings, one fresh process each
"""

import subprocess
import sys

import torch

from minbert.core.device import cpu_name, keep_freed_memory


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


def given_back(on: bool) -> float:
    """MB of RSS a freed 64 MB tensor (above glibc's 32 MB mmap ceiling) hands back to the OS."""
    keep_freed_memory(on)
    x = torch.ones(64 << 18)
    before = rss_mb()
    del x
    return before - rss_mb()


if __name__ == "__main__":
    if len(sys.argv) == 2:
        print(f"{given_back(sys.argv[1] == 'on'):.1f}")
    else:
        print(f"# {cpu_name()}, torch {torch.__version__}")
        for setting in ("off", "on"):
            mb = subprocess.run([sys.executable, __file__, setting], capture_output=True, text=True, check=True).stdout
            print(f"keep_memory {setting}: freeing 64 MB gave {mb.strip()} MB back to the OS")
