"""The allow-lists: what a solution may name (gate.py, before it runs) and run (fence.py, while it runs), from one
vocabulary hand-written here and reviewed once. Each record (assignments.py) adds its own recorded entries
(allowlist_recording.py) and `removes` the composites that compute its own answer; `review()` lists the entries that
look like an answer (REVIEW), each to be explained in `why_allowed`. An operator base name allows all its overloads,
a call name each of NAMESPACES (and `_` forms). The rules: docs/classroom.md (The allow-lists).
"""

import functools
import re

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
square logaddexp xlogy trace diag diag_embed triu_indices tril_indices constant_pad_nd outer inner erfc erfinv tan
atan atan2 sinh cosh hypot logit special_ndtr special_xlogy
elu leaky_relu hardtanh softplus mish log_sigmoid_forward mse_loss nll_loss_forward nll_loss2d_forward
binary_cross_entropy binary_cross_entropy_with_logits smooth_l1_loss huber_loss l1_loss kl_div
silu_backward elu_backward leaky_relu_backward hardtanh_backward softplus_backward mish_backward
log_sigmoid_backward mse_loss_backward nll_loss_backward binary_cross_entropy_backward smooth_l1_loss_backward
huber_loss_backward
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
inner combinations trace diag diag_embed triu_indices tril_indices logaddexp xlogy half backward erfc erfinv tan
atan atan2 sinh cosh hypot logit special.ndtr special.erf special.erfc special.expit special.logit special.xlogy
linalg.vector_norm linalg.norm dropout nll_loss kl_div mse_loss cross_entropy binary_cross_entropy
binary_cross_entropy_with_logits l1_loss smooth_l1_loss huber_loss logsigmoid softplus elu leaky_relu relu6
hardtanh mish normalize one_hot pad cosine_similarity
nn.GELU nn.ReLU nn.Tanh nn.Sigmoid nn.SiLU nn.Softmax nn.Dropout nn.Identity
""".split()

# The gate's words (gate.py): builtins, modules a block may import, their members, attributes of values.
BUILTINS = """abs all any bool callable dict divmod enumerate filter float frozenset int isinstance issubclass iter len
list map max min next pow print range repr reversed round set slice sorted str sum tuple zip""".split()
MODULES = """torch torch.nn torch.nn.functional torch.linalg numpy math collections itertools copy types
dataclasses""".split()
NUMPY = """abs absolute add subtract multiply divide true_divide floor_divide power square sqrt exp log log1p
maximum minimum fmax fmin clip sign floor ceil round rint isclose allclose isfinite isnan isinf logical_and logical_or
logical_not logical_xor equal not_equal less less_equal greater greater_equal where nonzero flatnonzero argwhere sort
argsort lexsort partition argpartition searchsorted unique take take_along_axis put_along_axis sum mean median
quantile percentile std var prod cumsum cumprod diff max min amax amin argmax argmin ptp count_nonzero all any
array asarray zeros ones empty full zeros_like ones_like empty_like full_like arange linspace eye concatenate stack
vstack hstack column_stack repeat tile reshape ravel transpose expand_dims squeeze broadcast_to outer dot inner
einsum matmul float64 float32 int64 int32 bool_ newaxis inf nan pi e ndarray size shape ndim""".split()
MEMBERS = [f"numpy.{n}" for n in NUMPY] + """collections.Counter collections.defaultdict collections.OrderedDict
collections.deque itertools.combinations itertools.permutations itertools.product itertools.chain
itertools.accumulate itertools.count dataclasses.replace types.SimpleNamespace copy.copy copy.deepcopy""".split()
ATTRIBUTES = """append extend insert pop remove clear items keys values get update setdefault copy index count add
discard sort reverse startswith endswith split strip lower upper join replace union intersection difference
issubset isdisjoint most_common elements appendleft popleft format
T mT all any argmax argmin argpartition argsort astype clip copy cumprod cumsum diagonal dot dtype fill flatten
imag item itemsize max mean min nbytes ndim nonzero partition prod ravel real repeat reshape round searchsorted
shape size sort squeeze std sum swapaxes take tolist trace transpose var outer reduce accumulate
parameters named_parameters buffers named_buffers children named_children modules named_modules state_dict
load_state_dict train eval requires_grad_ zero_grad forward training weight bias values indices padding_idx eps
normalized_shape elementwise_affine in_features out_features num_embeddings embedding_dim p inplace
approximate""".split()
SUGGEST = {"getattr": "the attribute itself (`x.weight`)", "setattr": "an assignment (`x.weight = w`)", "type":
           "`isinstance(x, T)`", "format": "an f-string", "global": "a return value", "yield": "a list", "class":
           "a function", "torch.cdist": "`(a[:, None] - b[None]).norm(dim=-1)`", "torch.linalg.svd": "`(a * b).sum()`",
           "torch.nn.functional.scaled_dot_product_attention": "`softmax(q @ k.transpose(-2, -1) * s + mask) @ v`"}

# Names worth a person's look on any list: composites and kernels that compute some assignment's answer.
REVIEW = re.compile(r"attention|fused|adam|multi_head|transformer|optim|lstm|gru|rnn|_native|flex|conv"
                    r"|linalg_(?!vector)", re.I)
NAMESPACES = ("torch.", "torch.Tensor.", "torch.nn.functional.")


_with_inplace = lambda names: set(names) | {n + "_" for n in names if not n.endswith("_")}  # noqa: E731


@functools.cache
def elementary_ops() -> frozenset:
    """Every overload of the vocabulary's operators, as the fence names them ('aten::add.Tensor')."""
    from minbert.classroom.fence import all_op_names
    names = _with_inplace(ELEMENTARY_OPS)
    return frozenset(n for n in all_op_names() if n.startswith("aten::") and n[6:].split(".")[0] in names)


@functools.cache
def elementary_calls() -> frozenset:
    return frozenset(f"{space}{name}{suffix}" for name in _with_inplace(ELEMENTARY_CALLS) for space in NAMESPACES
                     for suffix in ("", ".__get__", ".__set__") if space == "torch.Tensor." or not suffix)


def without(names, removed) -> frozenset:
    """The names not removed: a removed base name ('cosine_similarity') takes every namespace's and overload's."""
    base = lambda n: n.rsplit(".", 1)[-1] if "::" not in n else n.partition("::")[2].split(".")[0]  # noqa: E731
    return frozenset(n for n in names if base(n).rstrip("_") not in removed and base(n) not in removed)


def gate_lists(ASSIGNMENTS) -> dict:
    """The lists of the records in ASSIGNMENTS in the form gate.py reads (and the copy's ALLOWED.json holds)."""
    private = lambda c: any(p.startswith("_") for p in c.split(".")[:-1])  # noqa: E731 (torch._C._x: never named)
    return {"vocabulary": sorted(_with_inplace(ELEMENTARY_CALLS)), "namespaces": list(NAMESPACES),
            "builtins": BUILTINS, "modules": MODULES, "members": MEMBERS, "attributes": sorted(set(ATTRIBUTES)),
            "suggest": SUGGEST, "own": {a.key: sorted(c.removesuffix(".__get__") for c in a.calls if not private(c))
                                        for a in ASSIGNMENTS},
            "removed": {a.key: a.removes for a in ASSIGNMENTS if a.removes}}


def markdown(ASSIGNMENTS) -> str:
    """ALLOWED.md: what each assignment's solution may name, for the student."""
    code = lambda names, pre="": ", ".join(f"`{pre}{n}`" for n in sorted(set(names)))  # noqa: E731
    lines = ["# What each assignment's solution may name", "", "Before submitting, `python tests/gate.py` reads "
             "every solution block against these lists as the grader does: a refused block "
             "scores 0 where its function is graded, with one line naming what it refused.", "",
             f"Any assignment may name: the names its own code binds, the file's public names, {code(BUILTINS)} and "
             f"the builtin exceptions; the modules {code(MODULES)} (math's public functions, {code(MEMBERS)}); "
             "attributes of values: tensor methods and properties, the given classes' public attributes, "
             f"{code(ATTRIBUTES, '.')}. "
             "Never: private or dunder names, `global`/`nonlocal`, `yield`, `async`, classes, decorators of your own, "
             "`match` class patterns, `getattr` and the other reflection builtins.", "",
             "Each name below as `torch.X`, `x.X(...)` and `torch.nn.functional.X` where torch has it, in place (`X_`) "
             "as well: " + code(ELEMENTARY_CALLS), ""]
    for a in ASSIGNMENTS:
        own = gate_lists([a])["own"][a.key]
        lines += [f"## {a.key}", "", f"Its own: {code(own) or 'nothing more'}."]
        lines += [f"Removed: `{n}` ({why})." for n, why in a.removes.items()] + [""]
    return "\n".join(lines)


def review(a) -> list[str]:
    """'key: name' for each entry of an assignment's own lists that looks like an answer and is not explained."""
    return [f"{a.key}: {name}" for name in sorted(a.ops | a.calls)
            if REVIEW.search(name) and name not in a.why_allowed]
