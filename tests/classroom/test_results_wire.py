"""The results channel (minbert/classroom/wire.py): the child's bytes, parsed by the parent, never unpickled.

Oracle: each frame is written here by hand with `struct` (the format of wire.py's docstring), not with
wire.encode; a forged or malformed frame must cost every case with one line saying why, and a frame that
says what the child computed must give back tensors equal (torch.equal) to what it computed.
"""

import io
import struct

import pytest
import torch

from minbert.classroom import sandbox, wire
from minbert.classroom.grade import Message, compare, outputs_of

CODES = {dt: i for i, dt in enumerate(wire.DTYPES)}


def s8(text: str | bytes) -> bytes:
    data = text.encode() if isinstance(text, str) else text
    return bytes([len(data)]) + data


def output(name, dtype, shape, data: bytes) -> bytes:
    return s8(name) + bytes([CODES.get(dtype, dtype) if not isinstance(dtype, int) else dtype, len(shape)]) + \
        struct.pack(f"={len(shape)}I", *shape) + data


def frame(*cases, count=None) -> bytes:
    return wire.MAGIC + struct.pack("=I", len(cases) if count is None else count) + b"".join(cases)


def tensors(*outputs) -> bytes:
    return b"T" + bytes([len(outputs)]) + b"".join(outputs)


def read(data: bytes, n: int = 1):
    """(per-case results or None, why) as the grader reads a box's result pipe."""
    return outputs_of(sandbox.Outcome(0, b"", data), n, {}, "attention")


Y = torch.arange(6, dtype=torch.float32).reshape(2, 3)


def test_a_frame_of_plain_tensors_gives_back_what_the_child_computed():
    data = frame(tensors(output("y", torch.float32, (2, 3), Y.numpy().tobytes()),
                         output("n", torch.int64, (), struct.pack("=q", -7)),
                         output("ok", torch.bool, (3,), bytes([1, 0, 2])),
                         output("empty", torch.float64, (0, 4), b"")),
                 b"E" + s8("ValueError") + s8("minbert/bert/attention.py:12") + s8(""), b"X")
    got, why = read(data, 3)
    assert why == "", why
    first = got[0]
    assert torch.equal(first["y"], Y) and first["y"].dtype == torch.float32
    assert torch.equal(first["n"], torch.tensor(-7)) and torch.equal(first["ok"], torch.tensor([True, False, True]))
    assert first["empty"].shape == (0, 4)
    assert all(type(t) is torch.Tensor for t in first.values()), "the parent must hold tensors it built itself"
    assert isinstance(got[1], Message) and "raised ValueError" in got[1], got[1]
    assert got[2] == "the outputs are not a dict of tensors"


def test_what_the_child_encodes_the_parent_reads_back_unchanged():
    outs = [{"y": torch.randn(2, 3, 4, dtype=torch.float64), "i": torch.tensor([3, 1]), "b": torch.tensor(True),
             "h": torch.randn(5, dtype=torch.bfloat16)}, {"error": "KeyError", "where": "", "banned": ""}, "junk"]
    got, why = read(wire.encode(outs), 3)
    assert why == ""
    assert all(torch.equal(got[0][k], v) and got[0][k].dtype == v.dtype for k, v in outs[0].items())
    assert "raised KeyError" in got[1] and got[2] == "the outputs are not a dict of tensors"


class Forged(torch.Tensor):
    pass


def pickled(obj) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def forged_parameter():
    p = torch.nn.Parameter(torch.zeros(()), requires_grad=False)
    p.double = torch.DoubleTensor           # an instance attribute shadowing the method the old parent called
    return p


@pytest.mark.parametrize("name, data, why", [
    ("a pickled Parameter with an attribute shadowing .double()", pickled([{"y": forged_parameter()}]),
     "do not start with the grader's header"),
    ("a pickled tensor subclass", pickled([{"y": Y.as_subclass(Forged)}]), "do not start with the grader's header"),
    ("pickled plain tensors (the old format)", pickled([{"y": Y}]), "do not start with the grader's header"),
    ("a shape claiming more data than sent", frame(tensors(output("y", torch.float32, (2, 3), b"\0" * 8))),
     "end early"),
    ("more data than the shape holds", frame(tensors(output("y", torch.float32, (1,), b"\0" * 8))), "bytes follow"),
    ("a dtype outside the list", frame(tensors(output("y", 200, (1,), b"\0" * 4))), "dtype outside"),
    ("a complex dtype's number", frame(tensors(output("y", len(wire.DTYPES), (1,), b"\0" * 8))), "dtype outside"),
    ("too many dimensions", frame(tensors(output("y", torch.uint8, (1,) * 9, b"\0"))), "dimensions"),
    ("a shape whose product overflows", frame(tensors(output("y", torch.uint8, (1 << 31, 1 << 31), b""))),
     "elements"),
    ("a name that is not an identifier", frame(tensors(output("y\n[passed]", torch.uint8, (1,), b"\0"))),
     "name is not of the expected form"),
    ("a name given twice", frame(tensors(output("y", torch.uint8, (1,), b"\0"), output("y", torch.uint8, (1,), b"\0"))),
     "twice"),
    ("a truncated frame", frame(tensors(output("y", torch.float32, (2, 3), Y.numpy().tobytes())))[:-5], "end early"),
    ("a header cut short", wire.MAGIC[:5], "end early"),
    ("fewer cases than drawn", frame(tensors(), count=0), "expected 1"),
    ("an oversized case count", frame(tensors(), count=1 << 30), "expected 1"),
    ("an unknown case kind", frame(b"Z"), "unknown kind"),
    ("an error type that is not a name", frame(b"E" + s8("x" * 70) + s8("") + s8("")), "type is not of the expected"),
    ("non-ASCII text", frame(b"E" + s8(b"\xff\xfe") + s8("") + s8("")), "not ASCII"),
])
def test_a_forged_or_malformed_frame_costs_every_case_with_one_line(name, data, why):
    got, message = read(data)
    assert got is None, f"{name}: the parent accepted it"
    assert why in message and "\n" not in message, f"{name}: {message!r}"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_nan_and_inf_in_a_frame_fail_the_comparison(bad):
    y = Y.clone()
    y[1, 2] = bad
    got, why = read(frame(tensors(output("y", torch.float32, (2, 3), y.numpy().tobytes()))))
    assert why == ""
    assert compare(got[0], {"y": Y.double()}) == "y: holds NaN or inf"


def test_a_wrong_shape_claim_is_compared_as_sent():
    got, _ = read(frame(tensors(output("y", torch.float32, (3, 2), Y.numpy().tobytes()))))
    assert compare(got[0], {"y": Y.double()}) == "y: expected shape (2, 3), got (3, 2)"
