"""Device choice and `--amp auto`: fast and safe on every machine, decided from capability queries.

Oracle: (c) the decision table in minbert/core/device.py's docstring, with the capability queries
mocked (torch.cuda.is_bf16_supported, torch.cpu.get_capabilities), so every branch is checked
on any machine: CUDA with and without bf16, CPU with AMX, with AVX512-BF16, plain AVX2, and MPS.
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
    assert (dev.grad_scaler(torch.device("cpu"), amp) is not None) == (want == "fp16"), "fp16 needs a GradScaler, bf16 none"


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


@pytest.mark.parametrize("name", ["gpu", "cuda:x", "tpu"])
def test_bad_device_names_are_user_errors(name):
    with pytest.raises(UserError, match=f"--device {name}"):
        dev.pick_device(name)
