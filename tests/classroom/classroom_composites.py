"""Find the public callables that compute an assignment's answer (the gate's COMPOSITES are reviewed from this).

    python tests/classroom/classroom_composites.py [--assignments attention,surgery] [--seeds 1]

For each assignment, draws the grader's cases, computes the reference outputs (this repository's solution, through
the grader's own scenarios), and runs every public callable of torch, torch.nn.functional, torch.linalg,
torch.special and torch.fft (and numpy for the numpy assignments) on every ordered choice of one to four of the
tensors a solution holds (the case's, and for attention the projected q, k, v and the mask); a callable whose
output equals a reference output on every case is printed. Review each: a match that computes the answer goes to
allowlists.COMPOSITES with its reason; a coincidence (an identity, a copy of an input) is noted as such. The
nn.Module classes (nn.MultiheadAttention, nn.Transformer*) need weights and are reviewed by reading.
"""

import argparse
import itertools
import sys
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from minbert.classroom import assignments as C, cases as CASES, scenarios  # noqa: E402

SPACES = {"torch": torch, "torch.nn.functional": torch.nn.functional, "torch.linalg": torch.linalg,
          "torch.special": torch.special, "torch.fft": torch.fft}
SKIP = ("rand", "normal", "set", "bernoulli", "multinomial", "poisson", "empty", "dropout", "load", "save",
        "from_file", "manual_seed", "seed", "use_deterministic", "compile", "cuda", "vmap", "export")


def inputs(key: str, case: dict) -> list:
    """The tensors a solution of `key` holds for one case (floating ones, as the reference receives them)."""
    if key != "attention":
        return [v for v in case.values() if isinstance(v, torch.Tensor) and v.is_floating_point()]
    s, H = case["state"], case["cfg"]["num_attention_heads"]
    B, T, D = case["x"].shape

    def heads(name):
        return (case["x"] @ s[f"{name}.weight"].T + s[f"{name}.bias"]).view(B, T, H, D // H).transpose(1, 2)
    return [heads("query"), heads("key"), heads("value"), case["mask"]]


def outputs(key: str, case: dict) -> dict:
    """The reference outputs of one case (attention's also as heads, as a per-head answer gives them)."""
    out = scenarios.run(key, case)
    if key == "attention":
        B, T, D = out["y"].shape
        H = case["cfg"]["num_attention_heads"]
        out["y as heads"] = out["y"].view(B, T, H, D // H).transpose(1, 2)
    return out


def callables(key: str):
    spaces = dict(SPACES, **({"numpy": np} if key in ("meanshift", "mml") else {}))
    for where, module in spaces.items():
        for name in sorted(dir(module)):
            obj = getattr(module, name, None)
            if not name.startswith("_") and callable(obj) and not isinstance(obj, type) and not any(
                    s in name for s in SKIP) and not name.endswith("_"):
                yield f"{where}.{name}", obj


def same(got, want: torch.Tensor) -> bool:
    try:
        got = torch.as_tensor(np.asarray(got) if not isinstance(got, torch.Tensor) else got).double()
        return got.numel() == want.numel() > 0 and torch.allclose(got.reshape(want.shape), want.double(), atol=1e-5)
    except Exception:      # noqa: BLE001 - an output that is no tensor is no match
        return False


def matches(key: str, seeds) -> list[str]:
    runs = [(inputs(key, c), outputs(key, c)) for seed in seeds for c in CASES.draw(key, seed)]
    found = []
    for path, fn in callables(key):
        for n in range(1, min(4, len(runs[0][0])) + 1):
            hits = None
            for held, outs in runs:
                here = set()
                for order in itertools.permutations(range(len(held)), n):
                    try:
                        with warnings.catch_warnings(), torch.no_grad():
                            warnings.simplefilter("ignore")
                            got = fn(*(held[i].clone() for i in order))
                    except Exception:   # noqa: BLE001 - a signature that does not fit is no candidate
                        continue
                    parts = got if isinstance(got, (tuple, list)) else (got,)
                    here |= {f"inputs {order} -> {o}" for o, w in outs.items() for g in parts if same(g, w)}
                hits = here if hits is None else hits & here
                if not hits:
                    break
            if hits:
                found.append(f"{key}: {path}, {sorted(hits)[0]}, on every case")
    return found


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--assignments", default=",".join(C.BY_KEY))
    p.add_argument("--seeds", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(1)
    for key in args.assignments.split(","):
        print("\n".join(matches(key, range(args.seeds))) or f"{key}: no public callable equals a reference output")


if __name__ == "__main__":
    main()
