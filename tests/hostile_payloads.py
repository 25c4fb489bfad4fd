"""Hostile files and markdown payloads, shared by test_hostile.py and the uploader fuzz.

Each file is what issue 12 found: small on disk, expensive to load naively.
"""

from __future__ import annotations

import io
import json
import re
import struct
import zipfile
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from normviz.io import TensorLoadError, as_input, load_tensors


def pt_bytes(obj: object) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def st_bytes(header: dict, body: bytes = b"") -> bytes:
    """A .safetensors file from a header written by hand (any dtype name, any shape)."""
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + body


def pickle_zip(pkl: bytes) -> bytes:
    """A torch-style zip whose data.pkl is the given pickle bytes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/version", "3\n")
    return buf.getvalue()


def shared_references(levels: int = 24) -> bytes:
    """2 KB: a list of two references to a list of two references ... 2^levels paths."""
    x: list = [torch.ones(2, 3)]
    for _ in range(levels):
        x = [x, x]
    return pt_bytes(x)


def cyclic() -> bytes:
    c: list = [torch.ones(2, 3)]
    c.append(c)
    return pt_bytes(c)


def deep_nesting(n: int = 100_000) -> bytes:
    """Lists nested n deep (protocol 2: EMPTY_LIST n times, APPEND n-1 times)."""
    return pickle_zip(b"\x80\x02" + b"]" * n + b"a" * (n - 1) + b".")


def wide_pickle(n: int = 2_000_000) -> bytes:
    """A list of n empty lists: 2 MB of pickle, n opcodes for a pure-Python unpickler."""
    return pickle_zip(b"\x80\x02](" + b"]" * n + b"e.")


def zeros_csv(size: int = 49_900_000) -> bytes:
    return b"0\n" * (size // 2)


def png_bomb(side: int = 100_000) -> bytes:
    """A PNG under 200 bytes whose header declares side × side RGB pixels."""
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + body))
        return struct.pack(">I", len(body)) + kind + body + crc

    ihdr = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\0" * 1000)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    import zlib

    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def long_png(width: int, height: int) -> bytes:
    """A grey PNG of width × height black pixels, compressed row by row (16 KB at 2^20 × 16)."""
    import zlib

    z = zlib.compressobj(9)
    row = b"\0" * (width + 1)  # filter byte 0, then the row
    idat = b"".join(z.compress(row) for _ in range(height)) + z.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", ihdr)
        + _png_chunk(b"IDAT", idat)
        + (_png_chunk(b"IEND", b""))
    )


def progressive_jpeg(side: int = 4096, mode: str = "L", quality: int = 50) -> bytes:
    """A side × side progressive JPEG of smooth noise (Pillow's encoder: 6 scans grey)."""
    from PIL import Image

    small = np.random.default_rng(0).integers(0, 255, (64, 64), dtype=np.uint8)
    im = Image.fromarray(small).resize((side, side), Image.Resampling.BILINEAR).convert(mode)
    buf = io.BytesIO()
    im.save(buf, "JPEG", progressive=True, quality=quality)
    return buf.getvalue()


def jpeg_scan_spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each scan of a JPEG: its SOS segment and its entropy-coded data."""
    marker = re.compile(rb"\xff[^\x00\xd0-\xd7\xff]")
    spans, i = [], 2
    while i < len(data) and data[i + 1] != 0xD9:
        j = i + 2 + int.from_bytes(data[i + 2 : i + 4], "big")
        if data[i + 1] == 0xDA:
            j = marker.search(data, j).start()
            spans.append((i, j))
        i = j
    return spans


def scan_bomb(scans: int = 20_000, side: int = 4096) -> bytes:
    """Issue 23's bomb: a progressive JPEG whose smallest (AC) scan is repeated `scans`
    times (about 1 MB at 20,000; each repeat costs a pass over every coefficient)."""
    base = progressive_jpeg(side)
    spans = jpeg_scan_spans(base)
    start, end = min(spans, key=lambda s: s[1] - s[0])
    return base[: spans[-1][1]] + base[start:end] * scans + b"\xff\xd9"


# Jobs for normviz.io.worker's tests (run in the worker as "tests.hostile_payloads:...").
def spin(data: bytes, name: str) -> np.ndarray:
    """Never ends: only the worker's CPU limit stops it."""
    n = 0
    while True:
        n += 1


def hog(data: bytes, name: str) -> np.ndarray:
    """Asks for 8 GB: only the worker's memory limit stops it."""
    return np.ones(2**30, dtype=np.float64)


def raw_photo(data: bytes, name: str) -> np.ndarray:
    """Decodes a photo with no check of its cost (no scan count, no aspect ratio)."""
    from normviz.pretrained import photos

    return photos._pixels(data)


# name -> (file name, bytes builder, what the message must say, or None: it loads)
HOSTILE: dict[str, tuple[str, Callable[[], bytes], str | None]] = {
    "shared references": ("shared.pt", shared_references, None),
    "cyclic list": ("cycle.pt", cyclic, None),
    "100,000-deep nesting": ("deep.pt", deep_nesting, "levels deep"),
    "2 M-opcode pickle": ("wide.pt", wide_pickle, "pickle instructions"),
    "zero strides 1 GiB": (
        "expand.pt",
        lambda: pt_bytes(torch.zeros(1).expand(1024, 512, 512)),
        "268,435,456 values",
    ),
    "zero strides 2^31": ("e31.pt", lambda: pt_bytes(torch.zeros(1).expand(2**31)), "axis of"),
    "zero strides 2^36": ("e36.pt", lambda: pt_bytes(torch.zeros(1).expand(2**36)), "axis of"),
    "one storage, 40 views": (
        "views.pt",
        lambda: pt_bytes({f"w{i}": t for i, t in enumerate([torch.zeros(10**6)] * 40)}),
        "in all",
    ),
    "zero-stride state dict": (
        "sd.pt",
        lambda: pt_bytes({"bn.running_var": torch.ones(1).expand(2**31)}),
        "axis of",
    ),
    "csv of 50 MB zeros": ("zeros.csv", zeros_csv, "over the cap"),
    "csv one 50 MB number": ("line.csv", lambda: b"1" * 49_900_000, "more than 200 characters"),
    "csv one 50 MB row": ("row.csv", lambda: b"1," * 24_950_000, "over the cap"),
    "npy of 50 M bytes": ("b.npy", lambda: npy_bytes(np.zeros(50_000_000, np.uint8)), "may hold"),
    "safetensors F8_E8M0": (
        "e8.safetensors",
        lambda: st_bytes(
            {"x": {"dtype": "F8_E8M0", "shape": [4], "data_offsets": [0, 4]}}, b"1234"
        ),
        "F8_E8M0",
    ),
    "safetensors shape [0, 2^62]": (
        "z.safetensors",
        lambda: st_bytes({"x": {"dtype": "F32", "shape": [0, 2**62], "data_offsets": [0, 0]}}),
        "axis of",
    ),
    "safetensors 20,000 tensors": (
        "many.safetensors",
        lambda: st_bytes(
            {f"t{i}": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]} for i in range(20_000)}
        ),
        "20,000 tensors",
    ),
}

MAGNITUDES: dict[str, np.ndarray] = {
    "constant 1e16": np.full((4, 8), 1e16),
    "int64 timestamps": np.full((4, 8), 1_700_000_000_000_000_000, np.int64),
    "uint64 max": np.full((4, 8), np.iinfo(np.uint64).max, np.uint64),
    "+1e20": np.full((4, 8), 1e20),
    "-1e20 float32": np.full((4, 8), -1e20, np.float32),
    "1e308": np.full((4, 8), 1e308),
    "-1e308 mixed": np.array([[1.0, -1e308], [2.0, 3.0]]),
}

# Markdown that would be live if echoed raw: links, images, HTML, backticks that close a
# code span, Streamlit's colour directive and math, autolinks, entities, line breaks.
MARKDOWN: tuple[str, ...] = (
    "1`[Session expired: sign in](//ev.il)",
    "x` ![i](http://127.0.0.1:8799/m.png) `",
    "<img src=x onerror=alert(1)><b>bold</b>",
    ":red[alert] $x^2$ **b** _i_ ~~s~~",
    "``` `` ` [a](b)",
    "a\n\n# heading\r\n> quote [c](d)",
    "www.ev.il http://ev.il a@b.co <http://ev.il>",
    "&lt;script&gt; &#60;b&#62; \\`[x](y)\\",
    ":material/warning: :smile: [^1] [r][ref]\n\n[ref]: http://ev.il",
)


def both_paths(data: bytes, filename: str) -> dict[str, torch.Tensor] | TensorLoadError:
    """What /distributions and /choose do with an upload: load_tensors, then each
    tensor as an input (io.as_input) and the whole file through the state-dict audit.
    Returns the tensors or the refusal; any other exception fails the test."""
    try:
        tensors = load_tensors(data, filename)
    except TensorLoadError as e:
        assert str(e).strip() and "Traceback" not in str(e)
        return e
    for key, t in tensors.items():
        try:
            as_input(t, key)
        except TensorLoadError as e:
            assert str(e).strip()
    audit = _audit()
    if audit is not None:
        try:
            audit.audit_state_dict(tensors)
        except audit.AuditError as e:
            assert str(e).strip()
    return tensors


def _audit() -> Any:  # the audit module, if it still has the state-dict audit
    try:
        from normviz import audit
    except ImportError:
        return None
    return audit if hasattr(audit, "audit_state_dict") else None


# ---- reading markdown the way Streamlit does, for the parts the app writes ------------
# Three levels (see ui.safe): the source (":material/" rewritten), the syntax (outside
# code spans, an unescaped character opens a construct), the parsed text (remark-gfm
# links bare URLs and e-mail addresses, remark-emoji replaces :shortcodes:).

PUNCT = r"""!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~"""
_ESCAPED = re.compile(r"\\([" + re.escape(PUNCT) + "])")
SYNTAX = re.compile(r"[\[\]<>!$&\n]")  # link, image, HTML, entity, math, a new block
TEXT_TRANSFORMS = re.compile(
    r"https?://|www(?=\.)|[-.\w+]+@[-\w]+(?:\.[-\w]+)+|:[\w+-][\w_+-]*:", re.IGNORECASE
)
JOINER = "\u2060"


def split_code_spans(md: str) -> tuple[list[str], list[str]]:
    """(text outside code spans, escapes kept; contents of code spans), per CommonMark:
    a run of n backticks not escaped opens a span closed by the next run of exactly n."""
    runs = [(m.start(), m.end()) for m in re.finditer(r"`+", md)]
    outside: list[str] = []
    code: list[str] = []
    pos, r = 0, 0
    while r < len(runs):
        start, end = runs[r]
        r += 1
        if start < pos:
            continue
        slashes = len(md[pos:start]) - len(md[pos:start].rstrip("\\"))
        if slashes % 2:
            start += 1  # an escaped backtick is literal; the rest of the run may open
            if start == end:
                continue
        n = end - start
        close = next((i for i in range(r, len(runs)) if runs[i][1] - runs[i][0] == n), None)
        if close is None:
            continue  # no closing run: the backticks are literal
        outside.append(md[pos:start])
        code.append(md[end : runs[close][0]])
        pos, r = runs[close][1], close + 1
    outside.append(md[pos:])
    return outside, code


def rendered(md: str) -> str:
    """The text `md` shows (escapes resolved, code spans as their content, joiners,
    which do not show, removed)."""
    outside, code = split_code_spans(md)
    parts = []
    for i, text in enumerate(outside):
        parts.append(_ESCAPED.sub(r"\1", text))
        if i < len(code):
            c = code[i]
            parts.append(c[1:-1] if len(c) > 1 and c[0] == c[-1] == " " and c.strip() else c)
    return "".join(parts).replace(JOINER, "")


def assert_inert(md: str, literal: str | None = None) -> None:
    """Nothing in `md` is live at any of the three levels, and `literal` (the echoed
    text, flattened as ui.safe.plain does) shows exactly as it is."""
    assert ":material/" not in md, md
    outside, _code = split_code_spans(md)
    for text in outside:
        found = SYNTAX.search(_ESCAPED.sub("", text))
        assert found is None, f"live {found.group()!r} in {md!r}"
        found = TEXT_TRANSFORMS.search(_ESCAPED.sub(r"\1", text))
        assert found is None, f"text made live: {found.group()!r} in {md!r}"
    if literal is not None:
        assert literal in rendered(md), (literal, rendered(md), md)


def environ(data: bytes, name: str) -> np.ndarray:
    """The worker's environment, as the bytes of its JSON."""
    import os

    return np.frombuffer(json.dumps(dict(os.environ)).encode(), np.uint8)
