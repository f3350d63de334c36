"""Timing flags shared by the step benchmarks: torch threads, wall or CPU time, repetitions."""

import time

import torch


def add_args(p, reps_help: str) -> None:
    p.add_argument("--reps", type=int, default=5, help=reps_help)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--cpu_time", action="store_true",
                   help="time with the process's CPU time, not wall time: steadier on a shared machine (use with "
                        "--threads 1; it counts work, not waiting)")


def clock_from_args(a):
    """Set the thread count; the clock the flags ask for."""
    if a.threads:
        torch.set_num_threads(a.threads)
    return time.process_time if a.cpu_time else time.perf_counter
