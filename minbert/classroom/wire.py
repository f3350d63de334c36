"""The results channel: plain bytes from the child, parsed and turned into fresh tensors by the parent.

The child runs the submission, so everything it sends is the submission's to choose. Anything the parent
unpickles (torch.load, even with weights_only=True) can be an object the child built: a Parameter whose
instance attribute `double` is the class torch.DoubleTensor made `g.double()` return an empty tensor, and
`allclose(empty, expected)` is True. So nothing here unpickles, and nothing here calls a method or reads an
attribute of an object the child made: the parent reads bytes with `struct`, checks every field against a
fixed list and caps, and builds each tensor itself with `torch.frombuffer` on a copy of the bytes.

    frame   = MAGIC, u32 cases, case * cases                     (the machine's byte order: child and parent share it)
    case    = b"T", u8 outputs, output * outputs                 a dict of tensors
            | b"E", str8 type, str8 where, str8 banned           an exception: its type, file:line, blocked op
            | b"X"                                               not a dict of tensors
    output  = str8 name, u8 dtype (index in DTYPES), u8 rank, u32 * rank shape, raw data (numel * itemsize)
    str8    = u8 length, ASCII bytes

The parser refuses (WireError, a one-line reason) an unknown magic or kind, a dtype outside DTYPES, a name
that is not an identifier, a rank over MAX_RANK, more than MAX_ELEMENTS elements, a frame that ends early
or has bytes after its last case. This file is copied into the child's job folder: the child imports it by
path for `encode` (the standard library and torch only).
"""

import collections
import re
import struct

import torch

MAGIC = b"minbert-results-1\n"
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
          torch.int8, torch.uint8, torch.bool)
MAX_CASES, MAX_OUTPUTS, MAX_RANK = 64, 64, 8
MAX_ELEMENTS = 1 << 22              # per output; the pipe's byte cap bounds the whole frame
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
WHERE = re.compile(r"[ -~]{0,200}")       # printable ASCII; the parent checks it against the student's files


class WireError(ValueError):
    """The frame is not one the child's `encode` writes: the whole result is refused."""


# ---------------------------------------------------------------------- the child writes

def _str8(text: str) -> bytes:
    data = text.encode("ascii", "replace")[:255]
    return bytes([len(data)]) + data


def encode(results: list) -> bytes:
    """Each result: {name: tensor} or {"error": type name, "where": "minbert/x.py:N", "banned": op}."""
    out = [MAGIC, struct.pack("=I", len(results))]
    for r in results:
        if isinstance(r, dict) and "error" in r:
            out += [b"E", _str8(str(r["error"])), _str8(str(r.get("where", ""))), _str8(str(r.get("banned", "")))]
            continue
        try:
            if not isinstance(r, dict) or not all(isinstance(v, torch.Tensor) for v in r.values()):
                raise TypeError
            parts = [b"T", bytes([len(r)])]
            for name, t in r.items():
                t = t.detach().to("cpu").contiguous()
                shape = tuple(t.shape)
                parts += [_str8(str(name)), bytes([DTYPES.index(t.dtype), len(shape)]),
                          struct.pack(f"={len(shape)}I", *shape), _raw(t)]
            out += parts
        except (TypeError, ValueError, RuntimeError, struct.error):
            out.append(b"X")
    return b"".join(out)


def _raw(t: torch.Tensor) -> bytes:
    if t.numel() == 0:
        return b""
    flat = t.reshape(-1)
    return (flat.to(torch.uint8) if t.dtype == torch.bool else flat.view(torch.uint8)).numpy().tobytes()


# ---------------------------------------------------------------------- the parent reads

# An exception record, built by the parent from the frame's bytes (plain str fields).
Error = collections.namedtuple("Error", "kind where banned")


NOT_TENSORS = "not tensors"


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.at = bytes(data), 0

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.at + n > len(self.data):
            raise WireError(f"the results end early (in {what})")
        chunk = self.data[self.at:self.at + n]
        self.at += n
        return chunk

    def u8(self, what: str) -> int:
        return self.take(1, what)[0]

    def u32(self, what: str) -> int:
        return struct.unpack("=I", self.take(4, what))[0]

    def text(self, what: str, pattern: re.Pattern) -> str:
        raw = self.take(self.u8(what), what)
        try:
            text = raw.decode("ascii")
        except UnicodeDecodeError:
            raise WireError(f"{what} is not ASCII") from None
        if not pattern.fullmatch(text):
            raise WireError(f"{what} is not of the expected form")
        return text


def decode(data: bytes, cases: int) -> list:
    """Per case: {name: a tensor the parent built}, an Error, or NOT_TENSORS. Raises WireError."""
    r = _Reader(data)
    if r.take(len(MAGIC), "the header") != MAGIC:
        raise WireError("the results do not start with the grader's header")
    n = r.u32("the case count")
    if n != cases or n > MAX_CASES:
        raise WireError(f"the results hold {min(n, 10**6)} cases, expected {cases}")
    out = []
    for _ in range(n):
        kind = r.take(1, "a case's kind")
        if kind == b"T":
            out.append(_tensors(r))
        elif kind == b"E":
            out.append(Error(r.text("an error's type", NAME), r.text("an error's place", WHERE),
                             r.text("an error's blocked op", WHERE)))
        elif kind == b"X":
            out.append(NOT_TENSORS)
        else:
            raise WireError("a case of an unknown kind")
    if r.at != len(r.data):
        raise WireError(f"{len(r.data) - r.at} bytes follow the last case")
    return out


def _tensors(r: _Reader) -> dict:
    count = r.u8("an output count")
    if count > MAX_OUTPUTS:
        raise WireError(f"more than {MAX_OUTPUTS} outputs in a case")
    found = {}
    for _ in range(count):
        name = r.text("an output's name", NAME)
        code, rank = r.u8("a dtype"), r.u8("a rank")
        if code >= len(DTYPES):
            raise WireError(f"output {name!r}: a dtype outside the grader's list")
        if rank > MAX_RANK:
            raise WireError(f"output {name!r}: more than {MAX_RANK} dimensions")
        shape = [r.u32("a shape") for _ in range(rank)]
        numel = 1
        for size in shape:
            numel *= size
            if numel > MAX_ELEMENTS:
                raise WireError(f"output {name!r}: more than {MAX_ELEMENTS} elements")
        dtype = DTYPES[code]
        size = 1 if dtype == torch.bool else torch.empty((), dtype=dtype).element_size()
        raw = bytearray(r.take(numel * size, f"output {name!r}'s data"))
        if name in found:
            raise WireError(f"output {name!r} twice")
        found[name] = _tensor(raw, dtype, shape)
    return found


def _tensor(raw: bytearray, dtype: torch.dtype, shape: list) -> torch.Tensor:
    """A new tensor owning a copy of `raw`."""
    if not raw:
        return torch.zeros(shape, dtype=dtype)
    if dtype == torch.bool:
        flat = torch.frombuffer(raw, dtype=torch.uint8) != 0     # any non-zero byte is True, as torch reads it
    else:
        flat = torch.frombuffer(raw, dtype=dtype)
    return flat.clone().reshape(shape)
