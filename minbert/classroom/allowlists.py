"""The allow-lists of the runtime fence (fence.py) and of the integrity report: what a solution may run and call.

Each assignment allows two lists, held in its record (assignments.py, `Assignment.allowed_ops` and `allowed_calls`):
the shared vocabulary below, and the assignment's own entries (`Assignment.ops`, `Assignment.calls`), which are
exactly what its reference solution runs beyond that vocabulary, recorded:

    python -m minbert classroom allowlists           # run each reference under the fence's recording mode, print
                                                     # what each record must hold; exit 1 if a record differs

The recording runs the grader's own child process (child.py --record) over the cases of SEEDS, on the reference
laid over the student copy's template (left-out fast paths removed), so it sees what grading sees: the package's
import, the harness building objects and loading weights, the graded calls, the conversion of the outputs. Given
code that the harness runs is therefore on the list by construction, and reviewed with it. To the calls it adds
the torch callables the reference blocks name that never reach the call layer (a module's constructor,
torch.from_numpy), read by the integrity report's resolver: that report checks blocks against the same list.

Review, by hand, when a record changes: no entry may be a composite or a kernel that computes an assignment's answer
(`_scaled_dot_product_*`, `_fused_adam*`, `_native_multi_head_attention*`, `_transformer_encoder_layer*`,
`multi_head_attention_forward`, ...). `review()` lists every entry whose name looks like one (REVIEW); each must
be explained in the record's `why_allowed` (the layer and PALs run the given fast attention, on purpose) or go.

The shared vocabulary is elementary tensor maths, hand-written here and reviewed once: creation and copies, views
and indexing, pointwise arithmetic and comparisons, reductions, products (mm, bmm, einsum, matmul), softmax, and
the backward kernels of these. No linear-algebra decomposition (a factorisation turns PCGrad's vector form into its
coefficients), no random draw (the given code's initialisers are recorded per assignment), no fused kernel, no
attention, optimizer or normalisation layer. An operator base name allows all its overloads (`add` allows
`aten::add.Tensor`, `aten::add.out`, ...: each is the same elementary step); a call name is allowed as `torch.X`,
`torch.Tensor.X` and `torch.nn.functional.X`, and as a property `torch.Tensor.X.__get__`/`__set__`.
"""

import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ELEMENTARY_OPS = """
empty empty_like empty_strided zeros zeros_like ones ones_like full full_like arange linspace eye scalar_tensor
lift_fresh lift_fresh_copy _to_copy clone copy_ detach alias fill_ zero_ new_zeros new_ones new_full new_empty
new_empty_strided _local_scalar_dense resolve_conj resolve_neg tril triu tril_ triu_ masked_fill masked_fill_
view _unsafe_view expand permute transpose transpose_ t t_ unsqueeze unsqueeze_ squeeze squeeze_ select slice narrow
as_strided split split_with_sizes unbind chunk cat stack diagonal repeat roll flip index index_select gather scatter
scatter_add index_put index_put_ _index_put_impl_ masked_select where nonzero
add add_ sub sub_ rsub mul mul_ div div_ neg neg_ reciprocal reciprocal_ exp exp_ exp2 expm1 log log_ log1p log2 log10
sqrt sqrt_ rsqrt rsqrt_ pow pow_ abs abs_ sign sgn clamp clamp_ clamp_min clamp_min_ clamp_max clamp_max_ maximum
minimum tanh tanh_ sigmoid sigmoid_ erf erf_ sin cos floor ceil round trunc remainder fmod floor_divide lerp lerp_
addcmul addcmul_ addcdiv addcdiv_ eq ne lt le gt ge logical_and logical_or logical_not logical_xor bitwise_and
bitwise_or bitwise_not bitwise_xor isnan isinf isposinf isneginf nan_to_num relu relu_ gelu silu
sum mean prod amax amin max min aminmax argmax argmin var std var_mean std_mean linalg_vector_norm norm cumsum
cumprod logsumexp any all count_nonzero sort topk kthvalue median
mm bmm addmm baddbmm addbmm dot vdot mv addmv _softmax _log_softmax
_softmax_backward_data _log_softmax_backward_data tanh_backward sigmoid_backward gelu_backward threshold_backward
select_backward slice_backward index_select_backward value_selecting_reduction_backward
""".split()

ELEMENTARY_CALLS = """
__add__ __radd__ __iadd__ __sub__ __rsub__ __isub__ __mul__ __rmul__ __imul__ __truediv__ __rtruediv__ __itruediv__
__floordiv__ __rfloordiv__ __mod__ __pow__ __rpow__ __ipow__ __matmul__ __rmatmul__ __neg__ __pos__ __abs__
__invert__ __and__ __or__ __xor__ __iand__ __ior__ __rand__ __ror__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__
__getitem__ __setitem__ __bool__ __float__ __int__ __index__ __len__ __iter__ __contains__ __repr__ __str__
__format__ __array__ shape dtype device ndim T mT grad data requires_grad is_leaf
size dim numel item tolist numpy cpu to float double long int bool type_as is_floating_point detach clone
contiguous reshape reshape_as view view_as expand expand_as flatten unflatten permute transpose swapaxes swapdims
movedim moveaxis t unsqueeze squeeze select narrow split chunk unbind cat concat concatenate stack repeat roll flip
index_select gather scatter scatter_add masked_fill masked_fill_ masked_select where nonzero tril triu diagonal
tensor as_tensor empty empty_like zeros zeros_like ones ones_like full full_like arange linspace eye new_zeros
new_ones new_full new_empty new_tensor fill_ zero_ copy_ requires_grad_
add add_ sub sub_ rsub mul mul_ div div_ true_divide neg reciprocal exp exp2 expm1 log log1p log2 log10 sqrt rsqrt
pow square abs sign sgn clamp clamp_ clamp_min clamp_min_ clamp_max clamp_max_ clip maximum minimum tanh sigmoid erf
sin cos floor ceil round trunc remainder fmod floor_divide lerp lerp_ addcmul addcmul_ addcdiv addcdiv_ eq ne lt le
gt ge equal isclose allclose logical_and logical_or logical_not logical_xor bitwise_and bitwise_or bitwise_not
bitwise_xor isnan isinf isfinite isposinf isneginf nan_to_num relu gelu silu
sum mean prod amax amin max min aminmax argmax argmin var std var_mean std_mean norm cumsum cumprod logsumexp any
all count_nonzero sort argsort topk kthvalue median
matmul mm bmm addmm baddbmm addbmm dot vdot mv addmv outer einsum tensordot softmax log_softmax
Tensor finfo iinfo Size no_grad enable_grad is_tensor
""".split()

# Names worth a person's look on any list: composites and kernels that compute some assignment's answer.
REVIEW = re.compile(r"attention|fused|adam|multi_head|transformer|optim|lstm|gru|rnn|_native|flex|conv|linalg_(?!vector)",
                    re.I)
SEEDS = range(32)            # the cases the recording runs (a test records other seeds, and finds nothing new)
NAMESPACES = ("torch.", "torch.Tensor.", "torch.nn.functional.")


@functools.cache
def elementary_ops() -> frozenset:
    """Every overload of the vocabulary's operators, as the fence names them ('aten::add.Tensor')."""
    from minbert.classroom.fence import all_op_names
    names = set(ELEMENTARY_OPS)
    return frozenset(n for n in all_op_names() if n.startswith("aten::") and n[6:].split(".")[0] in names)


@functools.cache
def elementary_calls() -> frozenset:
    return frozenset(f"{space}{name}{suffix}" for name in ELEMENTARY_CALLS for space in NAMESPACES
                     for suffix in ("", ".__get__", ".__set__") if space == "torch.Tensor." or not suffix)


def review(a) -> list[str]:
    """'key: name' for each entry of an assignment's own lists that looks like an answer and is not explained."""
    return [f"{a.key}: {name}" for name in sorted(a.ops | a.calls)
            if REVIEW.search(name) and name not in a.why_allowed]


# ---------------------------------------------------------------------- the recording

def reference_template(dst: Path, key: str) -> Path:
    """The package as a perfect submission of `key` is graded: the student copy's template (left-out fast paths
    removed) with the reference solution in every block."""
    from minbert.classroom import assignments as C
    for rel in C.tracked_files(C.ROOT):
        if rel.startswith("minbert/") and not C.instructor_only(rel):
            path = dst / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if rel.endswith(".py"):
                text = (C.ROOT / rel).read_text(encoding="utf-8")
                path.write_text(C.strip(text, rel, set(), left_out={key})[0] if C.BEGIN in text else text,
                                encoding="utf-8")
            else:
                path.write_bytes((C.ROOT / rel).read_bytes())
    for path in (dst, *dst.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return dst


def record(key: str, seeds=SEEDS, template: Path | None = None) -> dict:
    """{"ops": [...], "calls": [...], "errors": [...]}: what the reference of `key` runs over the cases of `seeds`,
    through the grader's child process (not boxed: it runs the instructor's own code); `template`: a package folder
    to run instead of reference_template's."""
    from minbert.classroom import cases as CASES, grade as G
    with tempfile.TemporaryDirectory(prefix="minbert-allowlists-") as tmp:
        tmp = Path(tmp)
        template = template or reference_template(tmp / "template", key)
        job = tmp / "job"
        G.write_job(job, key, [case for seed in seeds for case in CASES.draw(key, seed)])
        read, write = os.pipe()
        env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}
        child = subprocess.Popen([sys.executable, "-I", str(job / "child.py"), str(template), key, str(job / "inputs.pt"),
                                  str(job), "--record"], close_fds=False, env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, preexec_fn=lambda: os.dup2(write, 3))
        os.close(write)
        with os.fdopen(read, "rb") as f:
            data = f.read()
        err = child.communicate()[1]
        if child.returncode or not data:
            raise RuntimeError(f"allowlists: the recording child of {key} failed ({child.returncode}): "
                               f"{err.decode(errors='replace')[-2000:]}")
    return json.loads(data)


def static(key: str) -> set:
    """The torch callables the reference blocks of `key` name (read, not run): constructors such as torch.nn.Linear
    and functions such as torch.from_numpy that never reach the call layer, for the integrity report."""
    from minbert.classroom import assignments as C, integrity
    found = set()
    for rel in C.tracked_files(C.ROOT):
        if rel.startswith("minbert/") and rel.endswith(".py") and not C.instructor_only(rel):
            text = (C.ROOT / rel).read_text(encoding="utf-8")
            if f"{C.BEGIN} {key}" in text:
                for _, block in integrity.blocks_of(C.omit(text, rel, set(C.BY_KEY)), {key}):
                    found |= block.used()
    return found


def derived(key: str, seeds=SEEDS) -> tuple[frozenset, frozenset, list]:
    """(ops, calls) the record of `key` must hold (what its reference runs, and names, beyond the vocabulary), and
    the errors its reference raised on the way (none, or the record would allow what a failing reference runs)."""
    got = record(key, seeds)
    return (frozenset(got["ops"]) - elementary_ops(), (frozenset(got["calls"]) | static(key)) - elementary_calls(),
            got["errors"])


def main(keys=None) -> int:
    """Print each record's derived lists next to what it holds; 1 if any differs or needs review."""
    from minbert.classroom import assignments as C
    bad = 0
    for a in C.ASSIGNMENTS:
        if keys and a.key not in keys:
            continue
        ops, calls, errors = derived(a.key)
        print(f"{a.key}:\n    ops={_literal(ops)},\n    calls={_literal(calls)},")
        for what, want, have in (("ops", ops, a.ops), ("calls", calls, a.calls)):
            if want != have:
                bad += 1
                print(f"  DIFFERS {what}: the record lacks {sorted(want - have)}, and holds {sorted(have - want)} "
                      "that the reference no longer runs")
        for e in errors:
            bad += 1
            print(f"  ERROR the reference raised {e}")
        for line in review(a):
            bad += 1
            print(f"  REVIEW {line}: an answer-computing name? explain it in why_allowed, or remove its use")
    print("allowlists: OK" if not bad else f"allowlists: {bad} problem(s)")
    return 1 if bad else 0


def _literal(names) -> str:
    return "frozenset({" + ", ".join(repr(n) for n in sorted(names)) + "})"
