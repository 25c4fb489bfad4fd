"""`.npy` and `.csv` uploads: sizes known before parsing, so nothing big is allocated
for a file that will be refused.

An `.npy` header gives its shape and dtype; `np.load(allow_pickle=False)` runs only
after both passed. A `.csv` is measured first (how many separators, the longest
field) with a few vectorized passes over its bytes, then parsed by NumPy's C reader;
only a failed parse walks it line by line, to name the first bad line.
"""

from __future__ import annotations

import codecs
import io
import re

import numpy as np
import torch

from normviz.io.checks import (
    SINGLE_KEY,
    TensorLoadError,
    check_np_dtype,
    check_shapes,
    check_values,
    file_element_cap,
    from_numpy,
    short,
)

# No number is this long; a longer field (a 50 MB line of digits) is refused unparsed.
MAX_FIELD = 200
_DELIMS = (",", "\t", ";")
_SEPARATORS = np.zeros(256, dtype=bool)
_SEPARATORS[[ord(c) for c in "\n\r,;\t"]] = True
_CHUNK = 1 << 20
_HEAD, _HEAD_FIELDS = 1 << 16, 1000  # how much of the first line decides its role
_NONBLANK = re.compile(rb"\S")
_BLANK_LINE = re.compile(rb"(?m)^[ \t\r\f\v]+$")


def npy(data: bytes) -> dict[str, torch.Tensor]:
    """An .npy file: header checked first, so a hostile shape allocates nothing."""
    fp = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(fp)
    except ValueError:
        raise TensorLoadError(
            "this is not a .npy file (it does not start with NumPy's magic bytes): "
            "save the array with np.save"
        ) from None
    try:
        if version == (1, 0):
            shape, _fortran, dtype = np.lib.format.read_array_header_1_0(fp)
        elif version == (2, 0):
            shape, _fortran, dtype = np.lib.format.read_array_header_2_0(fp)
        else:
            raise TensorLoadError(
                f".npy format version {version[0]}.{version[1]} is not supported: "
                "save a plain numeric array with np.save"
            )
    except TensorLoadError:
        raise
    except Exception as e:  # any malformed header
        raise TensorLoadError(f"the .npy header is corrupt ({short(str(e), 80)})") from None
    check_np_dtype(dtype, SINGLE_KEY)
    need = int(np.prod(shape, dtype=object)) * dtype.itemsize
    have = len(data) - fp.tell()
    if have < need:
        raise TensorLoadError(
            f"the .npy file is truncated: its header promises shape {tuple(shape)} "
            f"({need:,} bytes of data) but only {have:,} bytes follow"
        )
    check_shapes([(SINGLE_KEY, shape)])  # a bool or int8 array may hold 50 million values
    try:
        arr = np.load(io.BytesIO(data), allow_pickle=False)
    except ValueError as e:  # object arrays land here too: allow_pickle=False refuses them
        reason = short(str(e), 80)
        raise TensorLoadError(f"the .npy file could not be read safely ({reason})") from None
    return {SINGLE_KEY: from_numpy(arr, SINGLE_KEY)}


def csv(data: bytes) -> dict[str, torch.Tensor]:
    """A CSV matrix of numbers (an optional header row of names is skipped)."""
    if not data.isascii():  # checked 1 MB at a time: a decoded copy may be 4x the file
        check = codecs.getincrementaldecoder("utf-8")()
        try:
            for off in range(0, len(data), _CHUNK):
                check.decode(data[off : off + _CHUNK], final=off + _CHUNK >= len(data))
        except UnicodeDecodeError:
            raise TensorLoadError("the .csv file is not UTF-8 text") from None
    start = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    found = _NONBLANK.search(data, start)
    if found is None:
        raise TensorLoadError("the .csv file has no rows of numbers")
    _check_fields(data)
    line_start = max(start, data.rfind(b"\n", 0, found.start()) + 1)
    line_end = data.find(b"\n", found.start())
    line_end = len(data) if line_end < 0 else line_end
    # the first line's start decides the delimiter and whether it is a row of names
    head = data[line_start : min(line_end, line_start + _HEAD)].decode(errors="replace")
    delim = next((d for d in _DELIMS if d in head), ",")
    lines = data.count(b"\n") + 1
    values = data.count(delim.encode()) + lines
    if values > (cap := file_element_cap()):
        cols = data.count(delim.encode(), line_start, line_end) + 1
        raise TensorLoadError(
            f"the .csv file holds up to {values:,} values (about {lines:,} lines × {cols:,} "
            f"columns), over the cap of {cap:,} per file: save a slice of it"
        )
    header = all(not _is_number(f) for f in head.strip().split(delim)[:_HEAD_FIELDS])
    if header and _NONBLANK.search(data, line_end) is None:
        raise TensorLoadError("the .csv file has a header row but no rows of numbers")
    skip = data.count(b"\n", 0, line_start) + (1 if header else 0)
    if _BLANK_LINE.search(data):  # lines of spaces: NumPy would read them as a value
        data = _BLANK_LINE.sub(b"", data)  # (the line count stays)
    try:
        arr = np.loadtxt(
            io.BytesIO(data),
            delimiter=delim,
            ndmin=2,
            dtype=np.float64,
            encoding="utf-8-sig",
            skiprows=skip,
        )
    except (ValueError, TypeError):
        raise TensorLoadError(_csv_problem(data, delim, header)) from None
    check_shapes([(SINGLE_KEY, arr.shape)])
    check_values(torch.from_numpy(arr), SINGLE_KEY)  # before float32 rounds 1e300 to inf
    return {SINGLE_KEY: torch.from_numpy(arr.astype(np.float32))}


def _check_fields(data: bytes) -> None:
    """Refuse a field longer than MAX_FIELD, found in 1 MB vectorized chunks."""
    prev, n = -1, len(data)  # prev: the offset of the last separator seen
    for off in range(0, n, _CHUNK):
        chunk = np.frombuffer(data, np.uint8, count=min(_CHUNK, n - off), offset=off)
        ends = np.flatnonzero(_SEPARATORS[chunk]) + off
        if off + _CHUNK >= n:
            ends = np.append(ends, n)  # the end of the file ends the last field
        if ends.size:
            gaps = np.diff(ends, prepend=prev) - 1
            i = int(np.argmax(gaps))
            if gaps[i] > MAX_FIELD:
                _refuse_field(data, int(ends[i] - gaps[i]))
            prev = int(ends[-1])
        elif off + len(chunk) - 1 - prev > MAX_FIELD:  # a whole chunk without a separator
            _refuse_field(data, prev + 1)


def _refuse_field(data: bytes, at: int) -> None:
    line = data.count(b"\n", 0, at) + 1
    raise TensorLoadError(
        f"the .csv file has a value of more than {MAX_FIELD} characters at line {line:,}: "
        "it is not a matrix of numbers"
    )


def _is_number(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def _csv_problem(data: bytes, delim: str, header: bool) -> str:
    """The first bad line of a CSV that failed to parse, read one line at a time."""
    width = None
    for lineno, raw in enumerate(io.BytesIO(data), start=1):
        line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8").rstrip("\r\n")
        if not line.strip():
            continue
        fields = line.split(delim)
        if header:  # the row of names
            header = False
            continue
        if width is None:
            width = len(fields)
        if len(fields) != width:
            return (
                f"the .csv file is ragged: line {lineno:,} has {len(fields)} values but the "
                f"first row has {width}; every row needs the same number of columns"
            )
        for col, f in enumerate(fields, start=1):
            if not f.strip():
                return f"the .csv file has an empty value at line {lineno:,}, column {col}"
            if not _is_number(f):
                return (
                    f"the .csv file has {short(f.strip(), 20)!r} at line {lineno:,}, column "
                    f"{col}, which is not a number"
                )
    return "the .csv file could not be read as a matrix of numbers"
