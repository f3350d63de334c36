"""The lists of the two walls: the fence's (a vocabulary of what torch's registry does not tag; `shared` adds the
registry's) and the gate's (reflection, each assignment's answer composites). docs/classroom.md (The allow-lists).
"""

import functools
import re

ELEMENTARY_OPS = """
empty empty_like empty_strided zeros zeros_like ones ones_like full full_like arange linspace eye scalar_tensor
lift_fresh lift_fresh_copy _to_copy copy_ detach alias fill_ zero_ new_zeros new_ones new_full new_empty
new_empty_strided _local_scalar_dense resolve_conj resolve_neg tril triu tril_ triu_ masked_fill masked_fill_ view
_unsafe_view expand permute transpose transpose_ t t_ unsqueeze unsqueeze_ squeeze squeeze_ select slice narrow
as_strided split split_with_sizes unbind chunk cat stack diagonal repeat roll flip index index_select gather scatter
scatter_add index_put index_put_ _index_put_impl_ masked_select nonzero abs abs_ floor_divide eq ne lt le gt ge gelu
cumsum cumprod sort topk kthvalue median mm bmm addmm baddbmm addbmm dot vdot mv addmv _softmax _log_softmax
_softmax_backward_data _log_softmax_backward_data select_backward slice_backward index_select_backward
value_selecting_reduction_backward trace diag diag_embed triu_indices tril_indices constant_pad_nd outer inner
special_ndtr special_xlogy mish log_sigmoid_forward mse_loss nll_loss_forward nll_loss2d_forward binary_cross_entropy
binary_cross_entropy_with_logits smooth_l1_loss huber_loss l1_loss kl_div elu_backward leaky_relu_backward
hardtanh_backward softplus_backward mish_backward log_sigmoid_backward mse_loss_backward nll_loss_backward
binary_cross_entropy_backward smooth_l1_loss_backward huber_loss_backward
""".split()

ELEMENTARY_CALLS = """
__add__ __radd__ __iadd__ __sub__ __rsub__ __isub__ __mul__ __rmul__ __imul__ __truediv__ __rtruediv__ __itruediv__
__floordiv__ __rfloordiv__ __mod__ __pow__ __rpow__ __ipow__ __matmul__ __rmatmul__ __neg__ __pos__ __abs__ __invert__
__and__ __or__ __xor__ __iand__ __ior__ __rand__ __ror__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __getitem__
__setitem__ __bool__ __float__ __int__ __index__ __len__ __iter__ __contains__ __repr__ __str__ __format__ __array__
shape dtype device ndim T mT grad data requires_grad is_leaf size dim numel item tolist numpy cpu to float double long
int bool type_as is_floating_point detach contiguous reshape reshape_as view view_as expand expand_as flatten
unflatten permute transpose swapaxes swapdims movedim moveaxis t unsqueeze squeeze select narrow split chunk unbind
cat concat concatenate stack repeat roll flip index_select gather scatter scatter_add masked_fill masked_fill_
masked_select nonzero tril triu diagonal tensor as_tensor empty empty_like zeros zeros_like ones ones_like full
full_like arange linspace eye new_zeros new_ones new_full new_empty new_tensor fill_ zero_ copy_ requires_grad_
true_divide abs floor_divide eq ne lt le gt ge isclose allclose cumsum cumprod sort argsort topk kthvalue median
matmul mm bmm addmm baddbmm addbmm dot vdot mv addmv outer einsum tensordot softmax log_softmax Tensor finfo iinfo
Size no_grad enable_grad is_tensor inner combinations trace diag diag_embed triu_indices tril_indices half backward
special.ndtr special.erf special.erfc special.expit special.logit special.xlogy linalg.vector_norm linalg.norm dropout
nll_loss kl_div mse_loss cross_entropy binary_cross_entropy binary_cross_entropy_with_logits l1_loss smooth_l1_loss
huber_loss logsigmoid normalize one_hot pad cosine_similarity nn.GELU nn.ReLU nn.Tanh nn.Sigmoid nn.SiLU nn.Softmax
nn.Dropout nn.Identity
""".split()

# The gate's lists (gate.py): it stops reflection, so it lists what reaches the interpreter, not the maths. A block
# may name every public name of MODULES (and their classes' public attributes) but what REFLECTION and its
# assignment's COMPOSITES hold, matched by the object reached, whatever the path to it; a module another module
# imported is never its member (`torch.os`). Builtins: BUILTINS only.
MODULES = "torch numpy math itertools functools operator collections copy dataclasses".split()
BUILTINS = """abs all any bool callable complex dict divmod enumerate filter float frozenset hash int isinstance
issubclass iter len list map max min next ord chr pow print range repr reversed round set slice sorted str sum tuple
zip bytes object hasattr getattr type""".split()    # getattr/hasattr: a literal name; type: `type(x).__name__` only
# Refused to every block, each for its reason (reviewed): code loading, files, processes, the fence, memory.
LOADS, FILES, MEMORY = "loads or compiles code", "reads or writes files", "reads memory at an address"
KEYS = "makes attributes from runtime names (a protocol attribute such as __array_interface__)"
REFLECTION = {
    "torch.load": "unpickles a file: it runs code", "torch.save": FILES, "torch.from_file": FILES,
    "torch.serialization": "pickles", "torch.jit": LOADS + " (TorchScript runs below the fence's call layer)",
    "torch.library": "registers kernels below the fence", "torch.ops": "any kernel by name; load_library " + LOADS,
    "torch.classes": LOADS, "torch.utils": "cpp_extension " + LOADS + ", data starts processes, dlpack " + MEMORY,
    "torch.hub": "downloads and " + LOADS, "torch.package": LOADS, "torch.compile": LOADS, "torch.compiler": LOADS,
    "torch.export": LOADS, "torch.fx": LOADS, "torch.onnx": FILES, "torch.distributed": "starts processes",
    "torch.multiprocessing": "starts processes", "torch.overrides": "reaches the dispatcher's modes (the fence)",
    "torch.UntypedStorage": MEMORY + " (from_buffer, resize_)", "torch.TypedStorage": MEMORY,
    "torch.storage": MEMORY, "torch.frombuffer": MEMORY, "torch.from_dlpack": MEMORY,
    "torch.Tensor.set_": "points a tensor at any storage offset, unchecked: " + MEMORY,
    "torch.nn.ParameterDict": KEYS, "torch.nn.utils.parametrize": "builds classes at run time",
    "torch.nn.utils.parametrizations": "builds classes at run time",
    "numpy.ndarray": "its constructor reads any buffer as objects (dtype object): " + MEMORY,
    "numpy.recarray": MEMORY, "numpy.linalg.lapack_lite": "LAPACK with sizes unchecked: writes past a buffer",
    "torch.cuda": "the device allocator frees any address (caching_allocator_delete)", "numpy.memmap": FILES,
    "numpy.rec": MEMORY, "numpy.char": MEMORY, "numpy.ma": "a masked array's baseclass is ndarray (its constructor)",
    "numpy.lib": "stride_tricks.as_strided " + MEMORY + "; format unpickles", "numpy.ctypeslib": MEMORY,
    "numpy.core": "numpy's private core", "numpy.testing": "starts processes", "numpy.f2py": LOADS,
    "numpy.frombuffer": MEMORY, "numpy.from_dlpack": MEMORY, "numpy.fromfile": FILES, "numpy.load": FILES,
    "numpy.save": FILES, "numpy.savez": FILES, "numpy.savez_compressed": FILES, "numpy.loadtxt": FILES,
    "numpy.savetxt": FILES, "numpy.genfromtxt": FILES, "numpy.fromregex": FILES,
    "operator.attrgetter": "reads attributes by runtime name", "operator.methodcaller": "calls methods by runtime name",
    "collections.namedtuple": KEYS, "dataclasses.make_dataclass": KEYS,
    "functools.update_wrapper": "copies attributes by runtime names (getattr, setattr)",
    "functools.wraps": "copies attributes by runtime names (getattr, setattr)",
    "functools.total_ordering": "sets methods on an existing class", "dataclasses.dataclass": "rewrites a class",
    "functools.singledispatch": "its registry holds the classes a function's annotations name (a refused one too)",
    "functools.singledispatchmethod": "its registry holds the classes a function's annotations name",
    "numpy.test": "runs pytest, which imports modules by name",
    "torch.cond": "compiles its branches (dynamo sets the fence's modes aside)", "torch.while_loop": LOADS,
}
# A link of a path or an attribute on any value (its type unknown before it runs) with one of these names is refused:
# frames, generators, coroutines, code and tracebacks (f_back, gi_frame, co_code, tb_frame), the MRO and closure
# cells, the memory and file methods whatever object has them (numpy's ctypes, tofile, resize, byteswap of an
# object array's pointers; a memoryview's cast; a storage's resize_) and torch's storage classes. `.data` is read
# only on the way to another attribute (`p.data.mul_(...)`): an object array's is a writable memoryview of pointers.
WORDS = r"^(f|gi|cr|ag|tb|co)_|^(mro|cell_contents|ctypes|data_as|tofile|fromfile|from_file|from_buffer|frombuffer" \
        r"|dump|dumps|load|save|set_|storage|untyped_storage|resize|resize_|byteswap|cast|cffi|capsule|baseclass" \
        r"|format_map)$|Storage$"
# Refused classes whose methods a block may still name (`np.ndarray.argmin`: an instance's method, no constructor).
METHODS_OF = ["numpy.ndarray"]
# The forms a given idiom reads as what it means: `types.SimpleNamespace(name=value, ...)` (literal keywords only).
FORMS = {"types.SimpleNamespace": "literal keyword arguments only (its attributes are the names written)"}
ATTENTION = "computes the attention the assignment asks for"
TRANSFORMER = ["torch.nn.MultiheadAttention", "torch.nn.functional.multi_head_attention_forward",
               "torch.nn.Transformer", "torch.nn.TransformerEncoder", "torch.nn.TransformerEncoderLayer",
               "torch.nn.TransformerDecoder", "torch.nn.TransformerDecoderLayer", "torch.nn.attention", "torch.ao"]
GRAM = "PCGrad's and GradVac's coefficients come from the Gram matrix: the cosine, distance or factorisation is " \
       "what the assignment computes"
# Each assignment's answer composites (tests/classroom/classroom_composites.py runs every public callable whose
# signature fits the inputs against the reference; reviewed): Python ones the fence cannot see, C ones named early.
COMPOSITES = {
    "attention": dict.fromkeys(TRANSFORMER + ["torch.nn.functional.scaled_dot_product_attention"], ATTENTION),
    "layer": dict.fromkeys(TRANSFORMER, "computes a transformer layer"),
    "pals": dict.fromkeys(TRANSFORMER, ATTENTION),
    "adamw": {"torch.optim": "torch's optimizers and schedules compute the step and the schedule"},
    "smart": {"torch.optim": "torch.optim.swa_utils computes the teacher's moving average"},
    "surgery": dict.fromkeys(["torch.cosine_similarity", "torch.nn.functional.cosine_similarity",
                              "torch.nn.CosineSimilarity", "torch.cdist", "torch.nn.functional.pairwise_distance",
                              "torch.nn.PairwiseDistance", "torch.svd", "torch.pinverse", "torch.cholesky",
                              "torch.qr", "torch.lu"] + [f"torch.linalg.{n}" for n in (
                              "svd svdvals eig eigh eigvals eigvalsh qr cholesky cholesky_ex lstsq solve solve_ex "
                              "solve_triangular pinv inv inv_ex lu lu_factor lu_factor_ex lu_solve ldl_factor "
                              "ldl_solve").split()], GRAM),
}
SUGGEST = {"getattr": "`getattr(x, \"name\", default)`, a literal name", "setattr": "an assignment (`x.weight = w`)",
           "type": "`isinstance(x, T)`, or `type(x).__name__` in a message", "format": "an f-string",
           "global": "a return value", "yield": "a list", "class": "a function", "types.SimpleNamespace": "a dict",
           "numpy.ndarray": "`np.asarray(x)`; `isinstance(x, np.ndarray)` and type hints may name it",
           "torch.cdist": "`(a[:, None] - b[None]).norm(dim=-1)`", "torch.linalg.svd": "`(a * b).sum()`",
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


@functools.cache
def shared() -> tuple[frozenset, frozenset]:
    """(ops, calls) of the vocabulary and of every elementwise and reduction operator torch's registry tags
    (fence.elementwise): what every assignment allows, less its `removes`, besides its own."""
    from minbert.classroom.fence import elementwise
    ops, calls = elementwise(elementary_ops())
    return ops, elementary_calls() | calls


def without(names, removed) -> frozenset:
    """The names not removed: a removed base name ('cosine_similarity') takes every namespace's and overload's."""
    base = lambda n: n.rsplit(".", 1)[-1] if "::" not in n else n.partition("::")[2].split(".")[0]  # noqa: E731
    return frozenset(n for n in names if base(n).rstrip("_") not in removed and base(n) not in removed)


def gate_lists(ASSIGNMENTS) -> dict:
    """The lists in the form gate.py reads (and the copy's tests/ALLOWED.json holds): per assignment, what its
    record removes from the vocabulary and its composites, besides the lists common to all."""
    return {"modules": MODULES, "builtins": BUILTINS, "reflection": REFLECTION, "words": WORDS, "forms": FORMS,
            "methods_of": METHODS_OF,
            "suggest": SUGGEST, "composites": {a.key: {**COMPOSITES.get(a.key, {}), **{
                f"{space}{name}": why for name, why in a.removes.items() for space in ("torch.", "torch.nn.functional.")
            }} for a in ASSIGNMENTS}}


def markdown(ASSIGNMENTS) -> str:
    """ALLOWED.md: what each assignment's solution may name, for the student."""
    code = lambda names: ", ".join(f"`{n}`" for n in sorted(set(names)))  # noqa: E731
    lists = gate_lists(ASSIGNMENTS)
    lines = ["# What each assignment's solution may name", "", "Before submitting, `python tests/gate.py` reads "
             "every solution block as the grader does: a refused block scores 0 where its function is graded, with "
             "one line naming what it refused.", "",
             f"Any public name of {code(MODULES)} (functions, classes, their methods; modules in any form: call, "
             "module, type hint), what your code binds, the file's public names, the builtins "
             f"{code(BUILTINS)} and the builtin exceptions. Never: private or dunder names (in code, strings, keys, "
             "keywords or format fields), `global`/`nonlocal`, `yield`, `async`, classes, `match` class patterns, "
             "`**` of anything but a dict written out, a format field reading an attribute or an item, and:", ""]
    lines += [f"- `{n}`: {why}" for n, why in REFLECTION.items()]
    lines += [f"- `.X` on any value, X matching `{WORDS}`", ""]
    for a in ASSIGNMENTS:
        lines += [f"## {a.key}", ""] + [f"- `{n}`: {why}" for n, why in lists["composites"][a.key].items()] + [""]
    return "\n".join(lines)
def review(a) -> list[str]:
    """'key: name' for each entry of an assignment's own lists that looks like an answer and is not explained."""
    return [f"{a.key}: {name}" for name in sorted(a.ops | a.calls)
            if REVIEW.search(name) and name not in a.why_allowed]
