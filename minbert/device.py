"""Devices and mixed precision, the boring and safe way.

- `pick_device("auto")` tries cuda -> mps -> cpu; "cpu"/"cuda"/"mps" force one (with a clear
  error when it is not there). Nothing touches CUDA before it is asked for.
- `--amp off|bf16|fp16`: `autocast(device, amp)` runs matmuls in 16-bit while keeping
  reductions (softmax, LayerNorm, losses) in fp32. bf16 has fp32's exponent range, so it needs
  no loss scaling and also runs on CPU (2x faster training on CPUs with AMX/AVX512-BF16).
  fp16 needs a GradScaler: gradients of small losses underflow fp16's range, so the loss is
  multiplied by a large factor before backward and the gradients divided by it before the
  step; steps whose gradients overflowed (inf/NaN) are skipped and the factor lowered.
  `grad_scaler(device, amp)` returns one only for fp16 (None otherwise).
"""

import random

import numpy as np
import torch

AMP_DTYPES = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def pick_device(name: str = "auto") -> torch.device:
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"--device {name}: no CUDA device is available here; use --device cpu (or auto)")
    if name == "mps" and not torch.backends.mps.is_available():
        raise SystemExit("--device mps: MPS is not available here; use --device cpu (or auto)")
    return torch.device(name)


def autocast(device: torch.device, amp: str):
    """A context manager: autocast to the --amp dtype, or a no-op for 'off'."""
    dtype = AMP_DTYPES[amp]
    return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


def grad_scaler(device: torch.device, amp: str):
    return torch.amp.GradScaler(device.type) if amp == "fp16" else None


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
