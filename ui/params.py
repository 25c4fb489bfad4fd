"""The URL schema: parameter names, defaults, ranges, and forgiving parsing with warnings.

Every page reads its settings from the query string through these specs, so a
shared link reproduces a view, and a bad value falls back to its default with a
message naming the parameter instead of breaking the page. The specs are
`normviz.knobs.Knob`s: the shared ones are declared here, once, as the fields of
`Settings` (which also drive the sidebar and the input cache key), each page's own
come from its topic package (its sections' knobs).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from normviz import axes, batchnorm, choose, distributions, practice, residual, training
from normviz.core import Contract, NormConfigError, contract, parse_axes
from normviz.data import DEFAULT_GENERATOR, GENERATORS
from normviz.knobs import Knob, Value
from normviz.layouts import LAYOUTS
from normviz.limits import EPS_CHOICES, SIZE_LIMITS, max_elements
from normviz.methods import METHODS
from normviz.pretrained import SOURCES, is_real, minilm
from ui.safe import md_code, md_text

__all__ = ["EPS_CHOICES", "SIZE_LIMITS", "max_elements"]

Param = Knob  # a URL parameter is a knob
MAX_RAW_LEN = 200  # longer query values are refused outright
RAW_LIMITS = {"text": minilm.MAX_CHARS}  # ... except these, which may be longer
DATA_CHOICES = (*GENERATORS, *SOURCES)  # the generators, then the real sources
REAL_KNOBS = ("layer", "text")  # read only with a real source (a bad layer warns then)
ECHO_LIMIT = 40  # a warning quotes this much of a refused value or unknown name


def parse(p: Knob, raw: str) -> Value:
    """The value `raw` stands for, for knob `p`. Raises ValueError with a reason."""
    limit = RAW_LIMITS.get(p.name, MAX_RAW_LEN)
    if len(raw) > limit:
        raise ValueError(f"value too long: at most {limit:,} characters")
    raw = raw.strip()
    d = p.default
    if p.multi:
        picked = {v.strip() for v in raw.split(",")} if raw else set()
        choices = p.choices or ()
        if not picked <= set(choices):
            raise ValueError(f"expected a comma list of {', '.join(map(str, choices))}")
        return tuple(str(c) for c in choices if c in picked)
    if isinstance(d, bool):
        low = raw.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ValueError("expected 1 or 0")
    if isinstance(d, int):
        try:
            f = float(raw)
        except ValueError:
            raise ValueError("expected a whole number") from None
        if not math.isfinite(f) or f != int(f):
            raise ValueError("expected a whole number")
        v: Value = int(f)
    elif isinstance(d, float):
        try:
            v = float(raw)
        except ValueError:
            raise ValueError("expected a number") from None
        if not math.isfinite(v):
            raise ValueError("expected a finite number")
    else:
        v = raw
    if p.choices is not None:
        match = [c for c in p.choices if _same(c, v)]
        if not match:
            raise ValueError(f"expected {_one_of(p.choices)}")
        v = match[0]
    if (p.lo is not None and v < p.lo) or (p.hi is not None and v > p.hi):  # type: ignore[operator]
        raise ValueError(f"expected a value from {_fmt(p.lo)} to {_fmt(p.hi)}")
    return v


def _one_of(choices: Sequence[Value]) -> str:
    """ "one of a, b, c"; a long run of whole numbers as "a whole number from 1 to 49"."""
    first = choices[0]
    run = isinstance(first, int) and not isinstance(first, bool)
    if run and len(choices) > 8 and list(choices) == list(range(first, first + len(choices))):
        return f"a whole number from {first} to {choices[-1]}"
    return "one of " + ", ".join(map(str, choices))


def fmt(value: Value) -> str:
    """The query-string form of a knob value."""
    if isinstance(value, list | tuple):
        return ",".join(map(str, value))
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return _fmt(value)
    return str(value)


def _same(a: Value, b: Value) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0)
    return a == b


def _fmt(v: float | None) -> str:
    if v is None:
        return ""
    if float(v).is_integer() and abs(v) < 1e6:
        return str(int(v)) if not isinstance(v, float) or abs(v) >= 1 or v == 0 else f"{v:g}"
    return f"{v:g}"


def echo(name: str, raw: str) -> str:
    """`name=raw` quoted in a warning: a code span nothing in `raw` can close (the value
    is the visitor's: a backtick in it must not end the span and start markdown)."""
    return md_code(f"{name}={raw}", limit=len(name) + 1 + ECHO_LIMIT)


def read(
    query: Mapping[str, str | list[str]], params: Iterable[Param]
) -> tuple[dict[str, Value], list[str]]:
    """Values for `params` from a query string, each checked; warnings for what fell back.

    A parameter the query string does not set takes its default quietly (a link that
    sets a few values means "the defaults for the rest"); an invalid value warns.
    """
    values: dict[str, Value] = {}
    warnings: list[str] = []
    for p in params:
        raw = query.get(p.name)
        if isinstance(raw, list):
            raw = raw[-1] if raw else None
        if raw is None:
            values[p.name] = p.default
            continue
        try:
            values[p.name] = parse(p, raw)
        except ValueError as e:
            values[p.name] = p.default
            warnings.append(
                f"{echo(p.name, raw)} is not valid ({e}): using the default "
                f"{fmt(p.default) or '(none)'}."
            )
    return values, warnings


SIZES = tuple(
    Param(a, d, lo=1, hi=SIZE_LIMITS[a])
    for a, d in {"B": 4, "T": 6, "C": 8, "N": 4, "H": 4, "W": 4}.items()
)
# a view setting, not a tensor one: presenter mode (larger everything, no sidebar)
PRESENT = Param("present", False, label="Presenter mode")
VIEW = ("present",)  # shared parameters that change how a page looks, not what it computes


def setting(*knobs: Param, cache: bool = True, **kw: Any) -> Any:
    """A field of `Settings` declared by its URL knob(s): its default is the knob's
    unless `default`/`default_factory` is given; `cache=False` leaves it out of
    `Settings.key()` (it changes what runs on the input, not the input)."""
    if "default_factory" not in kw:
        kw.setdefault("default", knobs[0].default)
    return field(metadata={"knobs": knobs, "cache": cache}, **kw)


@dataclass(frozen=True)
class Settings:
    """The shared settings every page uses: a tensor, a method, its options.

    The one declaration of them (docs/architecture.md, "Shared settings"): each field
    names its URL knob(s), and the URL (`settings_from_query`, ui.state's writes), the
    sidebar (ui.sidebar) and the cache key (`key`) are read off these fields. The
    fields in `BESPOKE` have their own widgets and parsing; any other field is a plain
    knob, read and written by its knob and drawn by the knob → widget builder.
    """

    layout: str = setting(Param("layout", "BTC", choices=tuple(LAYOUTS)))
    sizes: dict[str, int] = field(
        default_factory=lambda: dict(LAYOUTS["BTC"].defaults), metadata={"knobs": SIZES}
    )
    method: str = setting(Param("method", "batch", choices=tuple(METHODS)), cache=False)
    groups: int = setting(Param("groups", 2, lo=1, hi=4096), cache=False)
    axes: tuple[str, ...] = setting(Param("axes", "C"), default=("C",), cache=False)
    centred: bool = setting(Param("centred", True), cache=False)
    eps: float = setting(Param("eps", 1e-5, choices=EPS_CHOICES), cache=False)
    seed: int = setting(Param("seed", 0, lo=0, hi=2**31 - 1))
    data: str = setting(Param("data", DEFAULT_GENERATOR, choices=DATA_CHOICES))
    # a real source's knobs: which normalization layer ("": its default), MiniLM's sentences
    # (a real input is cached by ui.realdata on its own key: not a generated input's)
    layer: str = setting(Param("layer", "", label="Layer"), cache=False)
    text: str = setting(
        Param("text", minilm.DEFAULT_TEXT, label="Sentences (one per line)"), cache=False
    )

    def key(self) -> tuple[tuple[str, object], ...]:
        """The cache key of the input these settings make: every field declared with
        `cache=True`, as plain hashable values (never a tensor)."""
        out = []
        for f in fields(self):
            if f.metadata.get("cache", True):
                v = getattr(self, f.name)
                out.append((f.name, tuple(v.items()) if isinstance(v, dict) else v))
        return tuple(out)

    @property
    def real(self) -> bool:
        """Is the data a real source (a pretrained model's activations)?"""
        return is_real(self.data)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.sizes[a] for a in LAYOUTS[self.layout].axes)

    @property
    def n_elements(self) -> int:
        return math.prod(self.shape)

    def norm_kwargs(self, method: str | None = None) -> dict[str, object]:
        """Keyword arguments for normalize()/contract() for `method` (default: ours)."""
        m = method or self.method
        kw: dict[str, object] = {"eps": self.eps}
        if METHODS[m].grouped:
            kw["groups"] = self.groups
        if m == "custom":
            kw["axes"] = self.axes
            kw["centred"] = self.centred
        return kw

    def contract(self, method: str | None = None) -> Contract:
        """These settings resolved for `method` (default: ours): what normviz takes.

        The one place a shared setting is refused: over the element cap, or an invalid
        combination (a G that does not divide C is refused, naming the divisors).

        Raises:
            NormConfigError: with the numbers to change.
        """
        self.check_size()
        kw = self.norm_kwargs(method)
        kw.pop("eps")
        return contract(method or self.method, self.layout, self.shape, **kw)  # type: ignore[arg-type]

    def check_size(self) -> None:
        """Raise NormConfigError over the element cap (a method without statistics too)."""
        if self.n_elements > max_elements():
            raise NormConfigError(
                f"{LAYOUTS[self.layout].shape_text(self.shape)} has {self.n_elements:,} elements, "
                f"over the app's cap of {max_elements():,}: "
                + (SOURCES[self.data].shrink if self.real else "make an axis smaller")
            )

    def check(self, method: str | None = None) -> None:
        """Raise NormConfigError when this combination cannot run (cap, groups, ...)."""
        self.contract(method)


BESPOKE = ("layout", "sizes", "method", "groups", "axes", "centred", "eps", "seed", "data")
BESPOKE += ("layer", "text")  # ... read and drawn by named code (the sidebar's sections)


def shared_knobs() -> dict[str, Param]:
    """Every shared URL knob, by name, in the declaration's order (`Settings`), then
    presenter mode."""
    out = {p.name: p for f in fields(Settings) for p in f.metadata.get("knobs", ())}
    return out | {PRESENT.name: PRESENT}


def plain_fields() -> list[tuple[str, Param]]:
    """The shared settings that are plain knobs (not in `BESPOKE`): (field name, knob),
    read, written and drawn generically."""
    return [
        (f.name, f.metadata["knobs"][0])
        for f in fields(Settings)
        if f.name not in BESPOKE and f.metadata.get("knobs")
    ]


SHARED: dict[str, Param] = shared_knobs()


def settings_from_query(
    query: Mapping[str, str | list[str]], page_names: Iterable[str] = ()
) -> tuple[Settings, list[str]]:
    """Shared settings from a query string, with a warning per rejected value.

    `page_names` are the current page's own parameters (not reported as unknown).
    """
    page_names = set(page_names)
    vals, warnings = read(query, [SHARED[n] for n in ("layout", "method", "eps", "seed", "data")])
    layout, method = str(vals["layout"]), str(vals["method"])
    if is_real(str(vals["data"])):  # a real source fixes the layout (the sidebar's too)
        layout = SOURCES[str(vals["data"])].layout
    lay = LAYOUTS[layout]
    # sizes default to the layout's classroom shape; groups/centred are read even when
    # the method ignores them, so switching method later keeps the link's choice
    specs = [replace(SHARED[a], default=lay.defaults[a]) for a in lay.axes]
    more_vals, more = read(query, [*specs, SHARED["groups"], SHARED["centred"]])
    vals |= more_vals
    warnings += more
    axes: tuple[str, ...] = ("C",)
    raw_axes = query.get("axes")
    if isinstance(raw_axes, list):
        raw_axes = raw_axes[-1] if raw_axes else None
    if raw_axes is not None:
        try:
            axes = parse_axes(layout, raw_axes[:MAX_RAW_LEN])
            if not axes:
                raise NormConfigError("no axis named")
        except NormConfigError as e:
            reason = md_text(e, limit=120)  # it quotes the unknown axis name
            warnings.append(
                f"{echo('axes', raw_axes)} is not valid ({reason}): using the default C."
            )
    layer, text, more = _real_knobs(query, str(vals["data"]))
    warnings += more
    plain = plain_fields()
    plain_vals, more = read(query, [p for _, p in plain])
    warnings += more
    shared = shared_knobs()
    unknown = [k for k in query if k not in shared and k not in page_names]
    if unknown:
        names = ", ".join(md_code(k, limit=ECHO_LIMIT) for k in unknown[:5])
        more = f" and {len(unknown) - 5:,} more" if len(unknown) > 5 else ""
        warnings.append(f"Ignored unknown parameter(s): {names}{more}.")
    s = Settings(
        layout=layout,
        sizes={a: int(vals[a]) for a in lay.axes},  # type: ignore[call-overload]
        method=method,
        groups=int(vals["groups"]),  # type: ignore[call-overload]
        axes=axes,
        centred=bool(vals["centred"]),
        eps=float(vals["eps"]),  # type: ignore[arg-type]
        seed=int(vals["seed"]),  # type: ignore[call-overload]
        data=str(vals["data"]),
        layer=layer,
        text=text,
        **{name: plain_vals[p.name] for name, p in plain},
    )
    return s, warnings


def _real_knobs(query: Mapping[str, str | list[str]], data: str) -> tuple[str, str, list[str]]:
    """A real source's layer and text from a query string (a layer the source does not
    have falls back to its default, with a warning); defaults for a generator."""
    vals, warnings = read(query, [SHARED["layer"], SHARED["text"]])
    layer, text = str(vals["layer"]), str(vals["text"])
    if not is_real(data):
        return "", text, []
    src = SOURCES[data]
    if layer and layer not in src.layers():
        warnings.append(
            f"{echo('layer', layer)} is not a normalization layer of {src.label}: using "
            f"{src.layer_label(src.default_layer())}."
        )
        layer = ""
    return layer or src.default_layer(), text, warnings


# Page-specific URL parameters (the shared ones are in SHARED), by URL path.
PAGE_PARAMS: dict[str, tuple[Param, ...]] = {
    "batchnorm": batchnorm.KNOBS,
    "distributions": distributions.KNOBS,
    "residual": residual.KNOBS,
    "choose": choose.KNOBS,
    "axes": axes.KNOBS,
    "practice": practice.KNOBS,  # `class`: a student joining a live class
    "training": training.KNOBS,
}
