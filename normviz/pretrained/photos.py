"""Photos for EfficientNet-Lite0: sample photos of eight scenes, and hardened uploads.

    sample_photos()          # (2, 224, 224, 3) uint8: china, flower (scikit-learn's)
    scene_photos()           # (8, 224, 224, 3) uint8: those two and six of scikit-image's
    to_input(img)            # any (H, W, 3) uint8 → (224, 224, 3): short side, centre crop
    decode_upload(data)      # PNG/JPEG bytes → (H, W, 3) uint8, or NormConfigError
    read_upload(data)        # → (224, 224, 3) uint8, decoded in a bounded worker

An upload is checked before it costs memory or time (`inspect`, a few milliseconds):
the byte count, the magic bytes (PNG or JPEG only), then from the header (Pillow
opens lazily) both sides, the pixel count, the aspect ratio (the resize to a 224-pixel
short side must stay small) and, for a JPEG, the number of scans (a progressive JPEG
that repeats a scan ten thousand times is 1 MB and costs a second per thousand).
Only then is it decoded: `verify()` walks the file, and a fresh copy is decoded. A
server decodes in a worker process bounded by PHOTO_BUDGET (`normviz.io.worker`),
so no photo costs it more than about a second of CPU. EXIF orientation is ignored
(the pixels as stored).
"""

from __future__ import annotations

import functools
import io
import re
import warnings

import numpy as np
from PIL import Image, ImageFilter, UnidentifiedImageError

from normviz.errors import NormConfigError
from normviz.io import worker

SIDE = 224
SAMPLE_PHOTOS: tuple[str, ...] = ("china", "flower")  # scikit-learn's load_sample_images()
# Eight scenes with an ImageNet class (checked by hand, pinned in the tests): scikit-learn's
# two, then six that scikit-image's wheel ships (skimage.data, no download). "camera" and
# "clock" are greyscale (the grey repeated in R, G and B).
SCENES: dict[str, str] = {
    "china": "a palace above a lake",
    "flower": "a dahlia",
    "chelsea": "a cat",
    "coffee": "a cup of coffee",
    "rocket": "a rocket on its launch pad",
    "motorcycle": "a motorcycle",
    "camera": "a greyscale cameraman at a tripod",
    "clock": "a greyscale wall clock",
}
SCENE_PHOTOS: tuple[str, ...] = tuple(SCENES)
MAX_BYTES = 8 * 2**20  # 8 MB
MAX_PIXELS = 4096 * 4096  # width × height, from the header
MAGIC: dict[str, bytes] = {"PNG": b"\x89PNG\r\n\x1a\n", "JPEG": b"\xff\xd8\xff"}
# long side / short side: a panorama is about 4:1. At 16:1 the resize to a 224-pixel
# short side makes at most 224 × 3,584 pixels; at 4096 × 1 it would ask for 13 GB.
MAX_ASPECT = 16
# A JPEG's scans (SOS markers): baseline has 1 (or one per component), libjpeg's
# progressive files 6 (grey) or 10 (colour). Each scan is a pass over every pixel.
MAX_SCANS = 12
# What decoding one photo may cost the server: a 4096 × 4096 progressive JPEG decodes
# and resizes in about 0.5 CPU-s and 0.2 GB.
PHOTO_BUDGET = worker.Budget(cpu_s=1.0, memory=768 * 2**20, deadline_s=60.0)
_MARKER = re.compile(rb"\xff[^\x00\xd0-\xd7\xff]")  # a marker: not a stuffed byte or a restart


def to_input(img: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 → (224, 224, 3) uint8: resize the short side to 224, crop the centre."""
    a = np.asarray(img)
    if a.ndim != 3 or a.shape[2] != 3 or a.dtype != np.uint8:
        raise NormConfigError(
            f"an image must be (height, width, 3) uint8 RGB, got {a.shape} {a.dtype}"
        )
    h, w = a.shape[:2]
    _check_size((w, h))
    scale = SIDE / min(h, w)
    nh, nw = max(SIDE, round(h * scale)), max(SIDE, round(w * scale))
    im = Image.fromarray(a).resize((nw, nh), Image.Resampling.BILINEAR)
    top, left = (nh - SIDE) // 2, (nw - SIDE) // 2
    return np.asarray(im.crop((left, top, left + SIDE, top + SIDE)), dtype=np.uint8)


@functools.cache
def _samples() -> np.ndarray:
    from sklearn.datasets import load_sample_images

    photos = load_sample_images()
    names = [f.rsplit("/", 1)[-1].split(".")[0] for f in photos.filenames]
    by_name = dict(zip(names, photos.images, strict=True))
    out = np.stack([to_input(by_name[n]) for n in SAMPLE_PHOTOS])
    out.setflags(write=False)
    return out


def sample_photos() -> np.ndarray:
    """scikit-learn's sample photos (china, flower) as (2, 224, 224, 3) uint8 (a copy)."""
    return _samples().copy()


def skimage_photo(name: str) -> np.ndarray:
    """One of scikit-image's photos in SCENE_PHOTOS, (H, W, 3) uint8 as stored in the wheel."""
    import skimage.data

    loaders = {
        "chelsea": skimage.data.chelsea,
        "coffee": skimage.data.coffee,
        "rocket": skimage.data.rocket,
        "motorcycle": lambda: skimage.data.stereo_motorcycle()[0],  # the left view
        "camera": skimage.data.camera,
        "clock": skimage.data.clock,
    }
    a = np.asarray(loaders[name]())
    return np.repeat(a[..., None], 3, axis=-1) if a.ndim == 2 else a


@functools.cache
def _scenes() -> np.ndarray:
    skimage_part = [to_input(skimage_photo(n)) for n in SCENE_PHOTOS[len(SAMPLE_PHOTOS) :]]
    out = np.concatenate([_samples(), np.stack(skimage_part)])
    out.setflags(write=False)
    return out


def scene_photos() -> np.ndarray:
    """The eight scenes of SCENE_PHOTOS as (8, 224, 224, 3) uint8 (a copy): one photo each."""
    return _scenes().copy()


def _kind(data: bytes) -> str:
    for kind, magic in MAGIC.items():
        if data.startswith(magic):
            return kind
    raise NormConfigError("the upload is not a PNG or JPEG image (its first bytes say otherwise)")


def inspect(data: bytes) -> tuple[str, int, int]:
    """(format, width, height) of an upload, from its header: cheap checks only.

    Raises:
        NormConfigError: empty, too many bytes, not PNG/JPEG, a side of 0, too many
        pixels, a long side more than MAX_ASPECT times the short one, more than
        MAX_SCANS scans in a JPEG, or a header that cannot be read.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise NormConfigError("the upload must be the bytes of a PNG or JPEG file")
    data = bytes(data)
    if not data:
        raise NormConfigError("the upload is empty")
    if len(data) > MAX_BYTES:
        raise NormConfigError(
            f"the image file has {len(data):,} bytes; the limit is {MAX_BYTES:,} (8 MB)"
        )
    kind = _kind(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            with Image.open(io.BytesIO(data), formats=[kind]) as im:  # lazy: the header only
                size = im.size
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise _too_many_pixels() from None
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError) as e:
            raise NormConfigError(f"the {kind} file is broken or truncated: {e}") from None
    _check_size(size)
    if kind == "JPEG" and jpeg_scans(data) > MAX_SCANS:
        raise NormConfigError(
            f"the JPEG file has more than {MAX_SCANS} scans; a progressive JPEG has up to 10, "
            "and each scan costs a pass over every pixel: save it again as a baseline "
            "(non-progressive) JPEG or a PNG"
        )
    return kind, *size


def jpeg_scans(data: bytes, stop: int = MAX_SCANS) -> int:
    """How many scans (SOS segments) a JPEG holds, counting up to `stop` + 1.

    Walks the segments by their lengths (an APP segment's payload may hold any bytes);
    a scan's entropy-coded data runs to the next marker, found with one regex search
    (inside it 0xFF is followed by 0x00, a restart marker or another 0xFF).
    """
    i, n, scans = 2, len(data), 0
    while i + 4 <= n and scans <= stop:
        if data[i] != 0xFF:  # bytes between segments: the decoder says it is broken
            m = _MARKER.search(data, i)
            if m is None:
                break
            i = m.start()
        marker = data[i + 1]
        if marker == 0xFF:  # a fill byte
            i += 1
            continue
        if marker == 0xD9:  # end of image
            break
        if 0xD0 <= marker <= 0xD7 or marker == 0x01:  # no payload
            i += 2
            continue
        i += 2 + int.from_bytes(data[i + 2 : i + 4], "big")
        if marker == 0xDA:
            scans += 1
            m = _MARKER.search(data, i)
            if m is None:
                break
            i = m.start()
    return scans


def decode_upload(data: bytes) -> np.ndarray:
    """A PNG or JPEG upload → (H, W, 3) uint8 RGB, decoded here (`inspect` first).

    Raises:
        NormConfigError: everything `inspect` refuses; broken or truncated, or a
        declared format that lies.
    """
    inspect(data)
    return _pixels(bytes(data))


def decoded_input(data: bytes, name: str = "") -> np.ndarray:
    """`to_input(decode_upload(data))`: the bounded worker's job (`read_upload`). A
    large JPEG is decoded at 1/2, 1/4 or 1/8 scale where that still leaves the short
    side at least 224 (libjpeg's DCT scaling: 5x cheaper for 4096 × 4096)."""
    _, w, h = inspect(data)
    scale = SIDE / min(w, h)
    return to_input(
        _pixels(bytes(data), (max(SIDE, round(w * scale)), max(SIDE, round(h * scale))))
    )


def read_upload(data: bytes) -> np.ndarray:
    """A PNG or JPEG upload → (224, 224, 3) uint8 (read-only), as `to_input` makes it:
    checked here (`inspect`), decoded in a worker bounded by PHOTO_BUDGET.

    Raises:
        NormConfigError: everything `decode_upload` refuses, and a photo whose
        decoding would exceed the budget.
    """
    inspect(data)
    job = "normviz.pretrained.photos:decoded_input"
    return worker.run(job, bytes(data), "", PHOTO_BUDGET, NormConfigError)[""]


def _pixels(data: bytes, at_least: tuple[int, int] | None = None) -> np.ndarray:
    """Decode a PNG or JPEG's pixels as (H, W, 3) uint8, with no check of its cost; a
    JPEG scaled down while both sides stay `at_least` (width, height), if given."""
    kind = _kind(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            with Image.open(io.BytesIO(data), formats=[kind]) as im:
                _check_size(im.size)
                im.verify()
            with Image.open(io.BytesIO(data), formats=[kind]) as im:
                _check_size(im.size)
                if at_least is not None and kind == "JPEG":
                    im.draft("RGB", at_least)
                rgb = _to_rgb(im)
        except NormConfigError:
            raise
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise _too_many_pixels() from None
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError) as e:
            raise NormConfigError(f"the {kind} file is broken or truncated: {e}") from None
    a = np.asarray(rgb, dtype=np.uint8)
    if a.ndim != 3 or a.shape[2] != 3:
        raise NormConfigError(f"the image decoded to shape {a.shape}, not (height, width, 3)")
    return a


def _too_many_pixels() -> NormConfigError:
    return NormConfigError(
        f"the image declares too many pixels to decode safely; the limit is "
        f"{MAX_PIXELS:,} pixels (4096 × 4096): scale it down first"
    )


def _check_size(size: tuple[int, int]) -> None:
    w, h = size
    if w < 1 or h < 1:
        raise NormConfigError(f"the image is {w} × {h} pixels: nothing to show")
    if w * h > MAX_PIXELS:
        raise NormConfigError(
            f"the image is {w:,} × {h:,} pixels ({w * h:,}); the limit is {MAX_PIXELS:,} "
            "pixels (4096 × 4096): scale it down first"
        )
    if max(w, h) > MAX_ASPECT * min(w, h):
        raise NormConfigError(
            f"the image is {w:,} × {h:,} pixels: its long side is {max(w, h) / min(w, h):,.1f} "
            f"times its short side, over the limit of {MAX_ASPECT}: crop it first"
        )


def _to_rgb(im: Image.Image) -> Image.Image:
    """Any mode → RGB; transparency is flattened onto white (not black)."""
    im.load()
    if im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info):
        rgba = im.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    return im.convert("RGB")


# ---- shifts that make BatchNorm's stored statistics stale ----

SHIFTS: tuple[str, ...] = ("none", "brightness", "contrast", "blur", "noise")
SHIFT_TEXT: dict[str, str] = {  # what strength s ∈ [0, 1] does
    "none": "the clean images",
    "brightness": "every pixel + 128·s grey levels (clipped at 255)",
    "contrast": "each image's pixels pulled toward its mean, contrast × (1 − 0.9·s)",
    "blur": "a Gaussian blur of radius 4·s pixels",
    "noise": "Gaussian noise of σ = 80·s grey levels per pixel (seeded)",
}


def shifted(images: np.ndarray, kind: str, strength: float, seed: int = 0) -> np.ndarray:
    """`images` (N, H, W, 3) uint8 under one shift of strength s ∈ [0, 1] (see SHIFT_TEXT)."""
    if kind not in SHIFTS:
        raise NormConfigError(f"unknown shift {kind!r}: choose one of {', '.join(SHIFTS)}")
    s = float(strength)
    if not 0.0 <= s <= 1.0:
        raise NormConfigError(f"the shift's strength must be between 0 and 1, got {strength}")
    a = np.asarray(images)
    x = a.astype(np.float32)
    if kind == "brightness":
        x = x + 128.0 * s
    elif kind == "contrast":
        m = x.mean(axis=(1, 2, 3), keepdims=True)
        x = m + (1.0 - 0.9 * s) * (x - m)
    elif kind == "blur":
        blur = ImageFilter.GaussianBlur(4.0 * s)
        return np.stack([np.asarray(Image.fromarray(i).filter(blur)) for i in a])
    elif kind == "noise":
        x = x + np.random.default_rng(seed).normal(0.0, 80.0 * s, x.shape).astype(np.float32)
    return np.clip(np.round(x), 0, 255).astype(np.uint8)
