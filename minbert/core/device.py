"""Devices, mixed precision, threads and seeds, the boring and safe way (what a user sees, and why each choice of
`--amp auto` and `--threads 0`: docs/install.md).

`pick_device("auto")` tries cuda -> mps -> cpu and touches CUDA only when asked. `autocast(device, amp)` runs
matmuls in 16-bit, reductions in fp32; fp16 needs the scripts' GradScaler, bf16 none. `resolve_amp` picks what is
fast and safe here and says why; `set_threads` takes the cores free now and warns about a count above them.
"""

import ctypes
import math
import os
import platform
import random
import time
import warnings

import numpy as np
import torch

from minbert.core.errors import UserError
from minbert.core.flags import at_least

THREADS = 0   # --threads: 0 = the cores free at start (set_threads)
AMP_DTYPES = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}
AMP_CHOICES = ("auto", *AMP_DTYPES)


def pick_device(name: str = "auto") -> torch.device:
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UserError(f"--device {name}: not a device name; expected auto, cpu, cuda, cuda:N or mps") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"--device {name}: no CUDA device is available here; use --device cpu (or auto)")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise UserError(f"--device {name}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise UserError("--device mps: MPS is not available here; use --device cpu (or auto)")
    if device.type not in ("cpu", "cuda", "mps"):
        raise UserError(f"--device {name}: expected auto, cpu, cuda, cuda:N or mps")
    return device


def cpu_has_native_bf16() -> bool:
    """AMX-BF16 or AVX512-BF16: the CPUs on which bf16 matmuls are faster than fp32."""
    caps = torch.cpu.get_capabilities()
    return bool(caps.get("amx_bf16") or caps.get("avx512_bf16"))


def cpu_name() -> str:
    """The CPU's marketing name (Linux /proc/cpuinfo), else what platform reports."""
    return machine()["cpu"]


def machine(cpuinfo="/proc/cpuinfo") -> dict:
    """The CPU a session runs on, for run.json: {"cpu": its name, "cpu_family", "cpu_model": the numbers that tell
    CPU generations apart where the name does not (AMD family 25 model 17: Zen 4), "cpus": logical CPUs}, from the
    first processor of /proc/cpuinfo; where there is none (macOS, Windows), the name platform reports and no numbers."""
    first = {}
    try:
        with open(cpuinfo) as f:
            for line in f:
                if not line.strip():   # the end of the first processor's block
                    break
                key, _, value = line.partition(":")
                first.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    number = {k: int(v) if v.isdigit() else v or None for k, v in
              (("cpu_family", first.get("cpu family", "")), ("cpu_model", first.get("model", "")))}
    return {"cpu": first.get("model name") or platform.processor() or platform.machine(), **number,
            "cpus": os.cpu_count()}


def cpu_capability() -> str:
    """What this CPU gives torch, e.g. 'AVX512, native bf16 (AVX512-BF16), 2 threads'."""
    caps = torch.cpu.get_capabilities()
    bf16 = [name for key, name in (("amx_bf16", "AMX-BF16"), ("avx512_bf16", "AVX512-BF16")) if caps.get(key)]
    native = f"native bf16 ({', '.join(bf16)})" if bf16 else "no native bf16"
    return f"{torch.backends.cpu.get_cpu_capability()}, {native}, {torch.get_num_threads()} threads"


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # macOS, Windows
        return os.cpu_count() or 1


def current_load(path: str = "/proc/loadavg", samples: int = 5, wait: float = 0.05) -> float | None:
    """How many other threads want a core now: the 1-minute load average, capped by the threads running at this
    moment (the 4th field of /proc/loadavg, "running/total", less this process; the most of `samples` reads
    `wait` s apart). The average alone lags a minute: right after a pip install it reads 0.6 on an idle machine."""
    try:
        average = os.getloadavg()[0]
    except (AttributeError, OSError):   # Windows
        return None
    try:
        running = []
        for i in range(samples):
            with open(path) as f:
                running.append(int(f.read().split()[3].split("/")[0]) - 1)   # "3/87": 3 running, this one among them
            if i + 1 < samples:
                time.sleep(wait)
    except (OSError, IndexError, ValueError):   # macOS: no /proc
        return average
    return min(average, float(max(running)))


def choose_threads(cores: int, load: float | None) -> int:
    """Threads for torch when other jobs keep `load` of `cores` busy: the free cores, at least 1. Half a core of
    slack (an idle machine's load is rarely exactly 0): 2 cores at load 0.4 -> 2, at load 0.6 or 1.0 -> 1."""
    if load is None:   # no load average (Windows): every core
        return cores
    return max(1, min(cores, math.floor(cores - load + 0.5)))


def set_threads(threads: int = THREADS, device=None, environ=None, load: float | None = None,
                cores: int | None = None, resumed: int = 0) -> str | None:
    """Set torch's CPU threads and print (and return) the line that says how many and why: --threads N, else
    OMP_NUM_THREADS (torch read it at import), else `resumed` (the resumed run's count: a CPU's sums depend on how many
    threads split them), else `choose_threads`. On a GPU without --threads: torch's default, and no line."""
    environ = os.environ if environ is None else environ
    if threads:
        torch.set_num_threads(threads)
        line = f"threads: {threads} (--threads)" + crowded(threads, cores, load)
    elif environ.get("OMP_NUM_THREADS"):
        line = f"threads: {torch.get_num_threads()} (OMP_NUM_THREADS={environ['OMP_NUM_THREADS']})"
    elif device is not None and device.type != "cpu":
        return None
    elif resumed:
        torch.set_num_threads(resumed)
        line = (f"threads: {resumed} (as the run it resumes, which then continues exactly; --threads N to choose)"
                + crowded(resumed, cores, load, "; a resume on another count is not bit for bit"))
    else:
        cores = cores or usable_cores()
        load = current_load() if load is None else load
        chosen = choose_threads(cores, load)
        torch.set_num_threads(chosen)
        busy = "no load average here" if load is None else f"other jobs keep {load:.1f} busy now"
        line = (f"threads: {chosen} of {cores} cores ({busy}; --threads N to choose: more than the free cores can "
                f"run several times slower)")
    print(line, flush=True)
    return line


def crowded(threads: int, cores: int | None = None, load: float | None = None, then: str = "") -> str:
    """What the threads line adds when `threads` is more than the cores free now: each operation waits for its
    slowest thread, so threads on cores that other jobs use hold up the rest, and 1 thread can run several times
    faster than 2 (3-4x for a resume with --threads 2 at load 4 on 2 cores). Empty otherwise."""
    cores = cores or usable_cores()
    load = current_load() if load is None else load
    free = choose_threads(cores, load)
    if load is None or threads <= free:
        return ""
    return (f"; other jobs keep {load:.1f} of {cores} cores busy now: {threads} threads can run several times "
            f"slower than --threads {free}{then}")


_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4        # glibc's mallopt parameter numbers (malloc.h)


def keep_freed_memory(on: bool = True) -> bool:
    """Make glibc keep freed blocks for reuse instead of unmapping them: glibc hands every freed block larger than
    32 MB back to the kernel, so a tensor that size made every step pays a page fault per 4 KB page (jemalloc and
    tcmalloc preloads keep them too; RSS stays at its peak). Linux/glibc only. on=False restores glibc's documented
    defaults. Returns whether glibc took the settings."""
    if platform.system() != "Linux":
        return False
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):   # musl and others have no mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # mmap off: blocks of any size come from the heap; trim threshold at the int maximum: the
    # heap's free top is never handed back, so the next step's tensors reuse it without faults.
    want = {_M_MMAP_MAX: 0, _M_TRIM_THRESHOLD: 2**31 - 1} if on else {_M_TRIM_THRESHOLD: 128 * 1024, _M_MMAP_MAX: 65536}
    return all(mallopt(k, v) == 1 for k, v in want.items())


def resolve_amp(amp: str, device: torch.device) -> tuple[str, str]:
    """--amp as given -> (off|bf16|fp16, the reason, printed at start). Warns on a slow explicit choice, refuses
    fp16 on a CPU (a UserError naming bf16 where the CPU has it natively, else off)."""
    cpu_bf16 = device.type == "cpu" and cpu_has_native_bf16()
    if amp != "auto":
        if device.type == "cpu" and amp == "bf16" and not cpu_bf16:
            warnings.warn("--amp bf16 on a CPU without native bf16 (no AMX/AVX512-BF16): autocast emulates it and "
                          "runs about 30x SLOWER than fp32 (MiniLM train step 30.1 s vs 1.1 s on an AVX2 EPYC). "
                          "Use --amp off (or auto).", stacklevel=2)
        if device.type == "cpu" and amp == "fp16":
            use = ("--amp bf16 (this CPU has native bf16)" if cpu_bf16 else
                   "--amp off (fp32: this CPU has no native bf16, where bf16 is ~30x slower too)")
            raise UserError(f"--amp fp16 on a CPU: CPUs do not accelerate fp16 (a run takes ~20x fp32's time); use "
                            f"{use}, or --amp auto, which picks it")
        return amp, "as requested"
    if device.type == "cuda":
        if torch.cuda.is_bf16_supported():
            return "bf16", f"auto: {torch.cuda.get_device_name(device)} supports bf16"
        return "fp16", f"auto: {torch.cuda.get_device_name(device)} has no bf16; fp16 with a GradScaler"
    if device.type == "cpu":
        if cpu_bf16:
            return "bf16", "auto: this CPU has native bf16 (AMX or AVX512-BF16)"
        return "off", "auto: this CPU has no native bf16 (AMX/AVX512-BF16), where bf16 would be ~30x slower than fp32"
    return "off", f"auto: no mixed precision on {device.type}"


def autocast(device: torch.device, amp: str):
    """A context manager: autocast to the --amp dtype, or a no-op for 'off'."""
    dtype = AMP_DTYPES[amp]
    return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)   # also seeds CUDA/MPS generators


def rng_state() -> dict:
    """Every random stream a training step reads (dropout, shuffles), for exact resume."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# ---------------------------------------------------------------------------------------------- flags
def add_args(parser, seed: int) -> None:
    g = parser.add_argument_group("machine")
    add_device_args(g)
    g.add_argument("--compile", action="store_true",
                   help="torch.compile the encoder blocks and heads: faster steps after a one-off compile "
                        "(needs a C++ compiler on CPU)")
    g.add_argument("--seed", type=int, default=seed, help="seeds heads, dropout and batch order; report several")


def add_device_args(group) -> None:
    """--device, --amp and --threads (set_threads reads it): every command that runs a model."""
    group.add_argument("--device", default="auto", help="auto (cuda > mps > cpu), cpu, cuda, cuda:1, mps")
    group.add_argument("--amp", choices=AMP_CHOICES, default="auto",
                       help="mixed precision. auto: bf16 on GPUs and CPUs with native bf16, fp16 on older GPUs, off "
                            "elsewhere (bf16 on a CPU without AMX/AVX512-BF16 is ~30x slower); the choice is printed")
    group.add_argument("--threads", type=at_least(0), default=THREADS,
                       help="CPU threads for torch. 0: the cores free at start (one line says how many), unless "
                            "OMP_NUM_THREADS is set; threads beyond the free cores slow a run down several times")
