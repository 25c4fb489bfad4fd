"""`.pt` and `.safetensors` uploads, bounded before they are read.

A `.pt` file is a zip holding a pickle (`data.pkl`) of the object structure and one
member per storage. Nothing is ever unpickled freely: `torch.load(weights_only=True)`
builds only tensors and plain containers. Its cost is bounded first: the archive's
member count and unpacked size, and the pickle's size and opcode count (read with
`pickletools`, which runs nothing), so loading takes a fraction of a second. The
loaded structure is then walked once per object (shared and cyclic references are
not followed twice) to a bounded depth and tensor count.

A `.safetensors` header (JSON) is read first: dtypes, shapes and the tensor count are
checked before the library copies any data.
"""

from __future__ import annotations

import io
import json
import pickle
import pickletools
import re
import zipfile

import torch

from normviz.io.checks import (
    MAX_DEPTH,
    MAX_KEY,
    MAX_TENSORS,
    SINGLE_KEY,
    TensorLoadError,
    check_shapes,
    short,
    upload_limit_bytes,
)

# A .pt zip may compress its members; refuse archives that would unpack to far more
# than the upload itself (a zip bomb) before torch reads them.
MAX_UNPACK_RATIO = 4
# The pickle of a 7,000-tensor state_dict is 0.76 MB and 229,000 opcodes; torch's
# weights-only unpickler (pure Python) takes about 1.4 µs an opcode.
MAX_PICKLE_BYTES = 8 * 2**20
MAX_PICKLE_OPS = 400_000
MAX_HEADER_BYTES = 8 * 2**20  # a safetensors header of 10,000 tensors is about 1 MB
_CENTRAL_ENTRY = b"PK\x01\x02"  # one per zip member (an upper bound on the count)
# safetensors dtype names torch can read; C64 is read, then refused as complex
SAFETENSORS_DTYPES = frozenset(
    ["F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8", "BOOL",
     "C64", "F8_E4M3", "F8_E4M3FNUZ", "F8_E5M2", "F8_E5M2FNUZ"]
)  # fmt: skip


def pt(data: bytes) -> dict[str, torch.Tensor]:
    """A torch.save file, loaded with weights_only=True (no arbitrary unpickling)."""
    if not data.startswith(b"PK\x03\x04"):
        raise TensorLoadError(
            "this .pt file is not in torch's zip format (it may be corrupt, or saved by a "
            "very old torch): re-save it with torch.save in a current torch"
        )
    if data.count(_CENTRAL_ENTRY) > MAX_TENSORS + 16:
        raise TensorLoadError(
            f"the .pt archive has more than {MAX_TENSORS:,} members: save fewer tensors"
        )
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            _check_archive(zf, len(data))
    except TensorLoadError:
        raise
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
        raise TensorLoadError(f"the .pt file is corrupt ({short(str(e), 80)})") from None
    try:
        obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True, mmap=False)
    except pickle.UnpicklingError as e:
        found = _unsafe_global(str(e))
        raise TensorLoadError(
            "refused: this .pt file holds Python objects other than tensors"
            + (f" ({found})" if found else "")
            + ". Loading it would mean unpickling them, which can run arbitrary code, so "
            "nothing in it was run. Save only tensors: torch.save(tensor) or "
            "torch.save(model.state_dict())"
        ) from None
    except Exception as e:  # torch raises RuntimeError, EOFError, KeyError, ... on bad files
        raise TensorLoadError(f"the .pt file is corrupt ({short(str(e), 80)})") from None
    tensors = flatten(obj)
    if not tensors:
        raise TensorLoadError(
            f"the .pt file holds no tensors (it holds a {type(obj).__name__}): save a tensor "
            "or a dict of tensors"
        )
    return tensors


def _check_archive(zf: zipfile.ZipFile, size: int) -> None:
    """Refuse a zip bomb and a pickle too big or too long to unpickle in a moment."""
    infos = zf.infolist()
    unpacked = sum(i.file_size for i in infos)
    if unpacked > MAX_UNPACK_RATIO * max(size, upload_limit_bytes() // 8):
        raise TensorLoadError(
            f"the .pt archive would unpack to {unpacked:,} bytes from {size:,}: refused as "
            "a possible zip bomb; save it with torch.save (uncompressed)"
        )
    for info in infos:
        if not info.filename.endswith(".pkl"):
            continue
        if info.file_size > MAX_PICKLE_BYTES:
            raise TensorLoadError(
                f"the .pt file's object structure ({info.file_size:,} bytes of pickle) is "
                f"over {MAX_PICKLE_BYTES // 2**20} MB: save only tensors, or a state_dict"
            )
        _count_opcodes(zf.read(info))


def _count_opcodes(raw: bytes) -> None:
    """Count the pickle's opcodes without running any (pickletools only parses)."""
    n = 0
    try:
        for _ in pickletools.genops(raw):
            n += 1
            if n > MAX_PICKLE_OPS:
                break
    except (ValueError, KeyError, EOFError, UnicodeDecodeError):
        return  # malformed: torch.load refuses it with its own reason
    if n > MAX_PICKLE_OPS:
        raise TensorLoadError(
            f"the .pt file's object structure has more than {MAX_PICKLE_OPS:,} pickle "
            "instructions (a state_dict of 7,000 tensors has about 230,000): save only "
            "tensors, or a state_dict"
        )


def _unsafe_global(msg: str) -> str:
    """The Python name torch's weights-only unpickler refused (`posix.system`), if it says."""
    m = re.search(r"GLOBAL\s+([\w.<>]+)", msg)
    return f"it refers to {short(m.group(1), 60)}" if m else ""


def flatten(obj: object) -> dict[str, torch.Tensor]:
    """Every tensor in a (nested) dict/list/tuple, under dotted keys; other leaves skipped.

    Each container is walked once: one reached again (shared, or a cycle) is skipped,
    so a 2 KB file of 2^24 paths to one list costs 25 steps, not 2^24.

    Raises:
        TensorLoadError: nesting deeper than MAX_DEPTH, a key longer than MAX_KEY
            characters, more than MAX_TENSORS tensors.
    """
    out: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    stack: list[tuple[object, str, int]] = [(obj, "", 0)]
    while stack:
        node, key, depth = stack.pop()
        if isinstance(node, torch.Tensor):
            if len(out) >= MAX_TENSORS:
                raise TensorLoadError(
                    f"the .pt file holds more than {MAX_TENSORS:,} tensors: save fewer"
                )
            out[key or SINGLE_KEY] = node
            continue
        if isinstance(node, dict):
            items = list(node.items())
        elif isinstance(node, list | tuple):
            items = list(enumerate(node))
        else:
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        if depth >= MAX_DEPTH:
            raise TensorLoadError(
                f"the .pt file nests dicts or lists more than {MAX_DEPTH} levels deep: save "
                "a flat dict of tensors (a state_dict)"
            )
        for k, v in reversed(items):
            if not isinstance(v, torch.Tensor | dict | list | tuple):
                continue
            part = str(k) if isinstance(k, str | int) else short(k, MAX_KEY + 1)
            full = f"{key}.{part}" if key else part
            if len(full) > MAX_KEY:
                raise TensorLoadError(
                    f"the .pt file has a key longer than {MAX_KEY} characters "
                    f"({short(full, 40)!r}): save shorter names"
                )
            stack.append((v, full, depth + 1))
    return out


def safetensors(data: bytes) -> dict[str, torch.Tensor]:
    """A .safetensors file: a JSON header and raw buffers, no code by design."""
    from safetensors import SafetensorError
    from safetensors.torch import load

    _check_header(data)
    try:
        tensors = load(data)
    except (SafetensorError, ValueError, TypeError, RuntimeError, OverflowError, KeyError) as e:
        raise TensorLoadError(f"the .safetensors file is corrupt ({short(str(e), 80)})") from None
    if not tensors:
        raise TensorLoadError("the .safetensors file holds no tensors")
    return tensors


def _check_header(data: bytes) -> None:
    """Read the JSON header and refuse what the data would cost before it is copied."""
    n = int.from_bytes(data[:8], "little") if len(data) >= 8 else -1
    if not 0 < n <= min(len(data) - 8, MAX_HEADER_BYTES):
        if n > MAX_HEADER_BYTES and len(data) - 8 >= n:
            raise TensorLoadError(
                f"the .safetensors header is {n:,} bytes, over {MAX_HEADER_BYTES // 2**20} MB"
                f": save fewer than {MAX_TENSORS:,} tensors"
            )
        return  # too short or inconsistent: the library says why
    try:
        header = json.loads(data[8 : 8 + n])
    except (ValueError, RecursionError):
        return
    if not isinstance(header, dict):
        return
    entries = [(k, v) for k, v in header.items() if k != "__metadata__" and isinstance(v, dict)]
    if len(entries) > MAX_TENSORS:
        raise TensorLoadError(
            f"the .safetensors file holds {len(entries):,} tensors, over {MAX_TENSORS:,}"
        )
    shapes = []
    for name, entry in entries:
        dtype, shape = entry.get("dtype"), entry.get("shape")
        if not isinstance(dtype, str) or not isinstance(shape, list):
            return
        if dtype not in SAFETENSORS_DTYPES:
            raise TensorLoadError(
                f"tensor {short(name)!r} has dtype {short(dtype, 20)!r}, which this app "
                "cannot read: save it as float32 (F32), float16, bfloat16 or an integer type"
            )
        if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            return
        shapes.append((str(name), tuple(shape)))
    check_shapes(shapes if len(shapes) > 1 else [(SINGLE_KEY, s) for _, s in shapes])
