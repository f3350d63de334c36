"""The allow-lists of the runtime fence (fence.py) and of the integrity report: what a solution may run and call.

Each assignment allows two lists, held in its record (assignments.py, `Assignment.allowed_ops` and `allowed_calls`):
the shared vocabulary below, and the assignment's own entries (`Assignment.ops`, `Assignment.calls`), which are
exactly what its reference solution runs beyond that vocabulary, recorded by allowlist_recording.py
(`python -m minbert classroom allowlists`).

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
