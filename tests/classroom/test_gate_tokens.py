"""The gate reads every token of a block (minbert/classroom/gate.py): each route of the last red team, rewritten
as a student would, is refused with its one line; each primitive that turns a number or a buffer into an object or
reads memory is refused, or shown harmless by numpy itself; the idioms honest code writes pass.

Oracles: the routes' own primitives run outside the gate (`np.ndarray(..., buffer=)` really turns an address into
the object there; numpy's own checks refuse the reinterpretations the gate lets through), the parent's check of a
refusal name against torch's own objects (`torch.os.system` is no torch callable), and the gate's one line naming
the token refused. Each test here failed with the gate's rule for it removed (docs/classroom.md, The gate).
"""

import subprocess
import sys

import numpy as np
import pytest
from test_gate import laid, refusals

from minbert.classroom import allowlists, assignments as classroom, gate, grade as G

ADDRESS = "int(repr(F.softmax).split()[-1].strip('>'), 16)"
INTERFACE = "{'data': (0, False), 'typestr': '|O', 'shape': (1,)}"
NP = "import numpy as np\n"
DUNDER = "chr(95) * 2 + 'array_interface' + chr(95) * 2"

# name: (the block in attention's, the token its one line must quote)
ROUTES = {
    "a dunder attribute through a keyword name": (
        f"import types\n_ns = types.SimpleNamespace(__array_interface__={INTERFACE})", "`__array_interface__`"),
    "a dunder attribute through a ** key": (
        f"import types\n_ns = types.SimpleNamespace(**{{'__array_interface__': {INTERFACE}}})",
        "`__array_interface__`"),
    "a chr-built key through ** of a built dict": (
        f"import types\n_ns = types.SimpleNamespace(**dict([({DUNDER}, {INTERFACE})]))", "`**dict("),
    "a mapping handed to SimpleNamespace": (
        f"import types\n_ns = types.SimpleNamespace({{{DUNDER}: {INTERFACE}}})", "`types.SimpleNamespace`"),
    "SimpleNamespace by an alias": ("import types\n_mk = types.SimpleNamespace\n_ns = _mk()",
                                    "`types.SimpleNamespace` takes"),
    "a chr-built key in a ParameterDict": (f"_pd = nn.ParameterDict({{{DUNDER}: {INTERFACE}}})",
                                          "`torch.nn.ParameterDict`"),
    "a chr-built name to getattr": ("_c = getattr(q, chr(95) * 2 + 'class' + chr(95) * 2)", "`getattr`"),
    "a join-built name to attrgetter": ("import operator\n_c = operator.attrgetter(''.join(['_', '_class__']))(q)",
                                       "`operator.attrgetter`"),
    "a namedtuple made from runtime names": ("import collections\n_t = collections.namedtuple('T', [chr(97)])",
                                            "`collections.namedtuple`"),
    "an address from repr, read as objects by ndarray": (
        f"{NP}_o = np.ndarray((1,), dtype=np.array([None]).dtype, buffer=np.array([{ADDRESS}]))", "`numpy.ndarray`"),
    "an address from an f-string, read through ctypes": (
        "import ctypes\n_a = int(f'{F.softmax!r}'.split()[-1][:-1], 16)", "`ctypes`"),
    "the ndarray constructor by another module's path": (NP + "_o = np.lib.mixins.np.ndarray((1,))", "`numpy.lib`"),
    "the ndarray constructor by numpy.typing's alias": (NP + "_o = np.typing.NDArray((1,))", "`numpy.ndarray`"),
    "the ndarray class from a masked array's baseclass": (NP + "_c = np.ma.masked_array([1.0]).baseclass",
                                                          "`numpy.ma`"),
    "baseclass on any value": ("_c = q.baseclass", "`.baseclass`"),
    "numpy's array interface read off a value": ("_i = q.numpy().__array_interface__", "`.__array_interface__`"),
    "numpy's ctypes view of an array": ("_p = q.numpy().ctypes.data", "`.ctypes`"),
    "as_strided from numpy's stride tricks": ("from numpy.lib.stride_tricks import as_strided", "`numpy.lib`"),
    "as_strided by its module path": (NP + "_v = np.lib.stride_tricks.as_strided(q.numpy(), (9,), (8,))",
                                      "`numpy.lib`"),
    "frombuffer": (NP + "_v = np.frombuffer(bytes(8), dtype=np.int64)", "`numpy.frombuffer`"),
    "fromfile": (NP + "_v = np.fromfile('/proc/self/mem')", "`numpy.fromfile`"),
    "torch.frombuffer": ("_v = torch.frombuffer(bytearray(8), dtype=torch.int64)", "`torch.frombuffer`"),
    "torch.from_file": ("_v = torch.from_file('/proc/self/mem', size=8)", "`torch.from_file`"),
    "a tensor pointed at any memory (set_)": ("q.set_(q.untyped_storage(), 0, (999,), (999,))", "`.set_`"),
    "a storage shrunk under its tensor": ("q.untyped_storage().resize_(0)", "`.untyped_storage`"),
    "a legacy storage class": ("_s = torch.FloatStorage(4)", "`torch.FloatStorage`"),
    "resize_ on any value": ("q.resize_(0)", "`.resize_`"),
    "attributes copied by runtime names": (
        "import functools\n_f = functools.update_wrapper(F.softmax, q, assigned=[chr(95) * 2 + 'dict' + chr(95) * 2])",
        "`functools.update_wrapper`"),
    "a refused class read back from annotations": (
        NP + "import functools\n_g = functools.singledispatch(abs)\ndef _f(a: np.ndarray):\n    return a\n"
        "_c = list(_g.register(_f).registry)", "`functools.singledispatch`"),
    "a class rewritten": ("import dataclasses\n_c = dataclasses.dataclass(nn.Linear)", "`dataclasses.dataclass`"),
    "branches compiled by dynamo": ("_y = torch.cond(q.sum() > 0, lambda a: a, lambda a: a, (q,))", "`torch.cond`"),
    "memoryview": ("_m = memoryview(bytes(8))", "`memoryview`"),
    "an object array's pointers rewritten through its memoryview's cast": (
        f"{NP}_a = np.array([None])\n_a.data.cast('B')[:8] = ({ADDRESS}).to_bytes(8, 'little')", "`.cast`"),
    "an object array's memoryview by an alias": (NP + "_m = np.array([None]).data\n_m[0:1] = _m", "`.data`"),
    "an object array's pointers byte-swapped": (NP + "np.array([print]).byteswap(inplace=True)", "`.byteswap`"),
    "an object array's strides set to split its pointers": (NP + "_a = np.array([print, len])\n_a.strides = (4,)",
                                                            "`.strides`"),
    "an array resized under its views": (NP + "_a = np.zeros(2)\n_a.resize(9, refcheck=False)", "`.resize`"),
    "LAPACK with unchecked sizes": (NP + "_f = np.linalg.lapack_lite.dgelsd", "`numpy.linalg.lapack_lite`"),
    "the CUDA allocator": ("torch.cuda.caching_allocator_delete(q.data_ptr())", "`torch.cuda`"),
    "a stdlib function a listed module imported": ("_s = torch.serialization.os.system", "`torch.serialization`"),
    "a builtin's class a listed module holds": ("_g = torch.cpu.MappingProxyType", "`torch.cpu.MappingProxyType`"),
    "inspect's function a listed module holds": ("_g = torch.ao.quantization.utils.signature", "`torch.ao`"),
    "id": ("_a = id(q)", "`id`"),
    "the mode stack by torch's private getter": ("_m = torch._C._get_function_stack_at(0)", "`torch._C`"),
    "a mode class's handler replaced": (
        "torch.overrides.TorchFunctionMode.__torch_function__ = lambda *a, **k: None", "`torch.overrides"),
    "a module another module imported (torch.os)": ("torch.os.system('true')", "`torch.os`"),
    "a private name in a string": ("_k = '_C'", "`_C`"),
    "a dunder in bytes": ("_k = b'__globals__'", "`__globals__`"),
    "a dunder in an f-string's text": ("_k = f'{q.dim()}__class__'", "`__class__`"),
    "a format field in a nested spec reading an attribute": ("_s = '{0:{1.T}}'.format(q, q)", "`{1.T}`"),
    "a nested f-string spec reading a dunder": ("_s = f'{q:{q.__class__}}'", "`.__class__`"),
    "format_map": ("_s = '{0}'.format_map({})", "`.format_map`"),
    "every link of a chain (q.T.__class__)": ("_c = q.T.__class__", "`.__class__`"),
    "a private attribute that is a word of the given code": ("_p = self._modules", "`._modules`"),
    "a private attribute of a tensor": ("_b = q._base", "`._base`"),
    "a frame's name on a generator": ("_g = (i for i in [0])\n_f = _g.gi_frame", "`.gi_frame`"),
    "a code object's name on any value": ("_c = F.softmax.co_code", "`.co_code`"),
    "a decorator compiling code": ("@torch.jit.script\ndef _f(a):\n    return a", "`torch.jit`"),
    "a decorator by a module's alias": ("import torch.jit as _j\n@_j.script\ndef _f(a):\n    return a", "`torch.jit`"),
    "a private keyword name": ("_y = F.softmax(q, -1, _stacklevel=3)", "`_stacklevel`"),
    "type beyond its message idiom": ("_t = type(q)", "`type`"),
    "the class of a value, by type's attribute": ("_t = type(q).__mro__", "`type`"),
}

# Idioms honest code writes (the given code writes the first four next to the blocks): none is refused.
IDIOMS = [
    "with torch.autocast(q.device.type, enabled=False):\n    y = q.float()",
    "if q.dim() != 4:\n    raise ValueError(f'{type(self).__name__}: expected 4 dimensions, got {q.dim()}')",
    "p = getattr(self, 'dropout', None)\nok = hasattr(self, 'dropout')",
    "table: nn.Embedding = nn.Embedding(3, 4)",
    "loss = nn.CrossEntropyLoss()(q.flatten(0, -2), q.flatten(0, -2).softmax(-1))",
    "loss = nn.BCEWithLogitsLoss()(q, q.sigmoid()) + nn.MSELoss()(q, q)",
    "import itertools\npairs = list(itertools.chain.from_iterable([[1], [2]]))",
    NP + "a = np.fabs(np.copy(q.numpy()))\nn = np.linalg.norm(a)\nt = torch.from_numpy(a)",
    NP + "a = q.numpy()\nok = isinstance(a, (np.ndarray, list))\ni = np.ndarray.argmin(a)",
    NP + "def f(a: np.ndarray) -> np.ndarray:\n    return a",
    "import types\nstate = types.SimpleNamespace(centers=q, count=0)",
    "import math\nimport functools, operator\ns = functools.reduce(operator.add, [math.sqrt(2.0), 1.0])",
    "import collections\nc = collections.Counter([1, 1]).most_common(1)",
    "torch._foreach_div_([q], [2.0])",
    "name = f'{q.dim()}_head'\nkey = 'word_embedding.weight'\nmsg = '{0} {k:.2f}'.format(1, k=2.0)",
    "kw = dict(dim=-1)\ny = F.softmax(q, **{'dim': -1})",
    NP + "x = np.array([None, 1], dtype=object)\ns = x.strides\nb = q.data_ptr()",
    "q.data.mul_(1.0)\nself.w = q.data.clone()",
    "y = torch.special.ndtr(q) + torch.fft.rfft(q).real.sum() + torch.linalg.vector_norm(q)",
]


@pytest.mark.parametrize("route", list(ROUTES))
def test_each_token_route_is_refused_with_one_line_naming_it(route, tmp_path):
    block, name = ROUTES[route]
    rel, text = laid(tmp_path, "attention", "attention.py", block + "\ny = q")
    got = refusals(text, rel, "attention")
    assert len(got) == 1 and got[0].startswith(f"{rel}:") and name in got[0], f"{route}: {got}"


@pytest.mark.parametrize("idiom", IDIOMS)
def test_the_idioms_honest_code_writes_pass(idiom, tmp_path):
    rel, text = laid(tmp_path, "attention", "attention.py", idiom + "\ny = q")
    assert refusals(text, rel, "attention") == []


def test_the_given_codes_private_names_are_refused(tmp_path):
    """meanshift.py gives `_unique_value_clusters`: a block may call the file's public names only."""
    rel, text = laid(tmp_path, "meanshift", "meanshift.py", "return _unique_value_clusters(x)", nth=1)
    (got,) = refusals(text, rel, "meanshift")
    assert "`_unique_value_clusters` is the given code's private name" in got, got


@pytest.mark.parametrize("code", [
    "o = np.ndarray((1,), dtype=np.array([None]).dtype, buffer=np.array([id(print)]))",
    "o = np.array([None]); o.data.cast('B')[:8] = id(print).to_bytes(8, 'little')",
])
def test_the_refused_numpy_primitives_turn_an_address_into_the_object_there(code):
    """Why numpy.ndarray, `.cast` and a bare `.data` are refused: with an object dtype (which no word need spell),
    each reads an address as a pointer. Run outside the gate, in a process of its own."""
    r = subprocess.run([sys.executable, "-c", f"import numpy as np; {code}; print(o[0] is print)"], capture_output=True,
                       text=True, timeout=120)
    assert r.stdout.strip() == "True", r.stdout + r.stderr


@pytest.mark.parametrize("primitive", [
    lambda a: a.view(object), lambda a: a.view([("f", "O")]), lambda a: a.getfield(np.dtype(object)),
    lambda a: np.array([None, print]).view(np.int64), lambda a: np.frombuffer(a.tobytes(), dtype=object),
    lambda a: setattr(a, "strides", (1 << 20,)), lambda a: setattr(a, "dtype", np.dtype(object)),
])
def test_numpy_refuses_the_reinterpretations_the_gate_lets_through(primitive):
    """Object arrays are containers (`dtype=object` passes the gate): numpy itself refuses to view numbers as
    objects or objects as numbers, to read a field as an object, and strides past the buffer."""
    with pytest.raises((TypeError, ValueError)):
        primitive(np.array([id(print), 0], dtype=np.int64))


def test_the_parent_accepts_no_refusal_name_under_an_alias_path():
    """A refusal's name comes from the box (text the submission may choose): `torch.os.system` names os.system,
    no torch callable, so the parent does not quote it; `torch.cdist` it does."""
    a = classroom.BY_KEY["surgery"]
    assert G.refusable("torch.cdist", a)
    assert not G.refusable("torch.os.system", a) and not G.refusable("torch.nn.functional.torch.load", a)


def test_every_reflection_entry_names_something_and_says_why():
    """Each REFLECTION and COMPOSITES path resolves (a typo would list nothing) and carries its reason."""
    import importlib
    for path, why in {**allowlists.REFLECTION, **{p: w for c in allowlists.COMPOSITES.values() for p, w in c.items()}
                      }.items():
        obj = gate._resolve(path) or importlib.import_module(path)
        assert why and obj is not None, path


def test_an_import_added_at_the_top_is_read_like_a_block_line():
    """The intake takes an import of a listed module added outside the blocks (the grader merges it), refuses one
    of a refused module, one that binds a name the file binds (given code would call it), and any other change."""
    data = allowlists.gate_lists(classroom.ASSIGNMENTS)
    common = gate.Lists(data, None)
    template = "import torch\n\n\ndef f(x):\n    ### BEGIN SOLUTION k\n    pass\n    ### END SOLUTION\n"
    for added, ok in (("import math", True), ("from itertools import chain", True), ("import numpy as np", True),
                      ("import torch.utils.cpp_extension", False), ("from numpy.lib import stride_tricks", False),
                      ("import ctypes", False), ("    import math", False), ("x = 1", False),
                      ("from torch.nn import MultiheadAttention as f", False), ("import numpy as torch", False)):
        submitted = template.replace("import torch\n", f"import torch\n{added}\n")
        blocks, message, outside = gate.changed_lines(template, submitted, "m.py", common)
        assert (message == "") is ok and (not ok or added in outside), (added, message)


def test_an_assignments_composites_are_refused_to_it_alone(tmp_path):
    """The Gram matrix's factorisations are surgery's answer, its norms are not; attention's SDPA is the layer's
    given fast path (what the layer's own block may call) and no composite of meanshift's."""
    for key, file, line, refused in (("surgery", "pcgrad.py", "n = torch.linalg.vector_norm(gram)", False),
                                     ("surgery", "pcgrad.py", "u = torch.linalg.svd(gram)", True),
                                     ("surgery", "pcgrad.py", "c = torch.cosine_similarity(gram, gram)", True),
                                     ("layer", "layers.py", "y = F.scaled_dot_product_attention(h, h, h)", False),
                                     ("attention", "attention.py", "y = F.scaled_dot_product_attention(q, k, v)", True),
                                     ("layer", "layers.py", "m = nn.TransformerEncoderLayer(4, 2)", True)):
        rel, text = laid(tmp_path, key, file, line + "\nreturn None")
        got = refusals(text, rel, key)
        assert bool(got) is refused and (not refused or f"assignment {key}'s answer" in got[0]), (line, got)
