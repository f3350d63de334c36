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


# ---------------------------------------------------------------------- the exact one-line reasons, and the caps

def refused(data: bytes, n: int = 1) -> str:
    got, message = read(data, n)
    assert got is None, f"minbert.classroom.wire.decode accepted {data[:60]!r}..."
    return message.removeprefix("the outputs could not be read: ")


OUT = output("y", torch.float32, (3,), b"\0" * 12)
ERR = b"E" + s8("KeyError") + s8("minbert/bert/attention.py:3") + s8("")


@pytest.mark.parametrize("cut, where", [
    (wire.MAGIC[:5], "the header"),
    (wire.MAGIC + b"\2\0", "the case count"),
    (frame(count=2), "a case's kind"),
    (frame(b"T", count=2), "an output count"),
    (frame(b"T\1", count=2), "an output's name"),                      # its length byte
    (frame(b"T\1\1", count=2), "an output's name"),                    # its letters
    (frame(b"T\1" + s8("y"), count=2), "a dtype"),
    (frame(b"T\1" + s8("y") + b"\0", count=2), "a rank"),
    (frame(b"T\1" + s8("y") + b"\0\1\3\0", count=2), "a shape"),
    (frame(tensors(OUT), count=2)[:-5], "output 'y''s data"),
    (frame(tensors(OUT), b"E", count=2), "an error's type"),
    (frame(tensors(OUT), b"E" + s8("KeyError"), count=2), "an error's place"),
    (frame(tensors(OUT), ERR[:-1], count=2), "an error's blocked op"),
])
def test_a_frame_that_ends_early_names_the_field_it_ends_in(cut, where):
    assert frame(tensors(OUT), ERR).startswith(cut)
    assert refused(cut, 2) == f"the results end early (in {where})"


@pytest.mark.parametrize("data, n, why", [
    (b"minbert-results-0\n" + b"\0" * 8, 1, "the results do not start with the grader's header"),
    (frame(b"Z"), 1, "a case of an unknown kind"),
    (frame(b"X") + b"\0" * 8, 1, "8 bytes follow the last case"),
    (frame(b"X", count=1 << 30), 1, "the results hold 1000000 cases, expected 1"),
    (frame(b"X", count=0xFFFFFFFF), 1, "the results hold 1000000 cases, expected 1"),    # an unsigned count
    (frame(b"X", count=3), 2, "the results hold 3 cases, expected 2"),
    (frame(*[b"X"] * 65), 65, "the results hold 65 cases, expected 65"),
    (frame(tensors(*[output(f"y{i}", torch.uint8, (1,), b"\0") for i in range(65)])), 1, "more than 64 outputs in a case"),
    (frame(tensors(output("y", torch.uint8, (0xFFFFFFFF,), b""))), 1, "output 'y': more than 4194304 elements"),
    (frame(tensors(output("y", torch.uint8, ((1 << 22) + 1,), b""))), 1, "output 'y': more than 4194304 elements"),
    (frame(tensors(output("y", torch.uint8, (1,) * 9, b"\0"))), 1, "output 'y': more than 8 dimensions"),
])
def test_each_refusal_is_one_exact_line(data, n, why):
    assert refused(data, n) == why


def test_the_caps_are_inclusive_64_cases_64_outputs_8_dimensions_4m_elements():
    got, why = read(frame(*[b"X"] * 64), 64)
    assert why == "" and len(got) == 64, why
    got, why = read(frame(tensors(*[output(f"y{i}", torch.uint8, (1,), bytes([i])) for i in range(64)])))
    assert why == "" and [int(got[0][f"y{i}"]) for i in range(64)] == list(range(64)), why
    got, why = read(frame(tensors(output("y", torch.int8, (1,) * 8, b"\xff"))))
    assert why == "" and got[0]["y"].shape == (1,) * 8 and int(got[0]["y"].flatten()[0]) == -1, why
    got, why = read(frame(tensors(output("y", torch.uint8, (1 << 22,), b"\1" * (1 << 22)))))
    assert why == "" and got[0]["y"].shape == (1 << 22,) and int(got[0]["y"].sum()) == 1 << 22, why


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.float16])
def test_an_empty_output_keeps_its_dtype(dtype):
    got, why = read(frame(tensors(output("e", dtype, (0, 2), b""))))
    assert why == "" and got[0]["e"].dtype == dtype and got[0]["e"].shape == (0, 2), (why, got)


def test_the_child_writes_the_frame_of_the_docstring_byte_for_byte():
    where, op = "minbert/bert/attention.py:3", "aten::_scaled_dot_product_attention_math"
    assert wire.encode([{"e": torch.zeros(0, 3, dtype=torch.int32)},
                        {"error": "KeyError", "where": where, "banned": op}, {"error": "ValueError"}]) == frame(
        tensors(output("e", torch.int32, (0, 3), b"")),
        b"E" + s8("KeyError") + s8(where) + s8(op), b"E" + s8("ValueError") + s8("") + s8(""))


def test_the_child_cuts_text_at_255_bytes_and_replaces_what_is_not_ascii():
    assert wire.encode([{"error": "x" * 300, "where": "minbert/é.py:1"}]) == frame(
        b"E" + bytes([255]) + b"x" * 255 + s8("minbert/?.py:1") + s8(""))


@pytest.mark.parametrize("shape, ok", [
    ((2048, 2048), True),                    # 4,194,304 elements: the cap, exactly
    ((2048, 2049), False),                   # each size far under the cap, their product over it
    ((2, 1024, 2048), True),
    ((3, 1024, 2048), False),
    ((8,) * 7 + (2,), True),                 # 8 dimensions: 2**22
    ((8,) * 7 + (3,), False),
    ((65536, 65536), False),                 # 2**32: a product that would wrap a 32-bit count
    ((0, 65536, 65536), True),               # no element at all
])
def test_the_element_cap_counts_every_dimension_of_a_shape(shape, ok):
    """wire.MAX_ELEMENTS (4,194,304 = 2**22) bounds the product of the sizes, whatever the rank; the frame then
    carries exactly that many uint8 values."""
    numel = 1
    for n in shape:
        numel *= n
    data = b"\1" * numel if numel <= wire.MAX_ELEMENTS else b""
    got, why = read(frame(tensors(output("y", torch.uint8, shape, data))))
    if ok:
        assert why == "" and tuple(got[0]["y"].shape) == shape and int(got[0]["y"].sum()) == numel, why
    else:
        assert why == "the outputs could not be read: output 'y': more than 4194304 elements", why
