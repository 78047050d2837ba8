"""Safe YAML: the flat mappings cairn rewrites all the time (the marker, a change summary's front
matter) without PyYAML, anything else with PyYAML (libyaml's C loader and dumper when PyYAML was
built with them), imported only then.

``load_flat`` and ``dump_flat`` handle one shape: a mapping of plain keys to strings, integers,
plain decimal floats (``0.84``: a change summary's cost) and nulls, with at most one level of
nested mappings, written one ``key: value`` a line. They
return None for anything they are not sure of, and ``safe_load``/``safe_dump`` then ask PyYAML,
so both always give what PyYAML gives (``tests/util/test_yaml_io.py`` checks it on generated
input). PyYAML's constructor costs ~150 µs a marker even with libyaml, these ~15 µs, and the
commands that read or write a marker do not import PyYAML at all.
"""

from __future__ import annotations

import functools
import re

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from typing import Any

# What an unquoted scalar means under YAML 1.1's implicit types (yaml.org/type/: null, bool, int,
# float, timestamp, merge, value). Only the forms cairn writes are decided; a value that another
# form of those types might cover answers "other", and the caller leaves it to PyYAML.
_NULL = frozenset({"", "~", "null", "Null", "NULL"})
_BOOL = frozenset(
    spelling
    for word in ("yes", "no", "true", "false", "on", "off")
    for spelling in (word, word.capitalize(), word.upper())
)
# y and n are booleans in the YAML 1.1 spec but strings to PyYAML; a lone !, & or * is an indicator
_UNDECIDED_CHARACTERS = frozenset("yYnN!&*")
_DECIMAL = re.compile(r"0|-?[1-9][0-9]*")
_ISO_TIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
    r"(?:T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:Z|[-+][0-9]{2}:[0-9]{2})?)?"
)
# A superset of every other number or time form (bases 2, 8 and 16, underscores, sexagesimal,
# fractions, exponents, .inf and .nan, dates with one-digit parts or a space) and the two
# one-character types.
_NUMBER_OR_TIME = re.compile(
    r"[-+]?(?:0[xXbBoO][0-9a-fA-F_]*|[0-9_]*(?:[.:][0-9_]*)*(?:[eE][-+]?[0-9]+)?|\.[A-Za-z]+)"
    r"|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt \t].*)?|<<|="
)


@functools.lru_cache(maxsize=4096)
def plain_scalar_tag(value: str) -> str:
    """The type YAML gives ``value`` written unquoted: ``str``, ``int``, ``null``, ``bool`` or
    ``timestamp``; ``other`` when it may be another type (or one of these in a rarer form)."""
    if value in _NULL:
        return "null"
    if value in _BOOL:
        return "bool"
    if _DECIMAL.fullmatch(value):
        return "int"
    if _ISO_TIME.fullmatch(value):
        return "timestamp"
    if value in _UNDECIDED_CHARACTERS or _NUMBER_OR_TIME.fullmatch(value):
        return "other"
    return "str"


# --- the flat shape ---------------------------------------------------------------------------

_LINE = re.compile(r"( {2})?([a-z_]{1,64}):(?: (.*))?")
_PLAIN_IN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./@+-]*")  # read as itself when plain
# Strings PyYAML may write plain (no indicator, no space): it does unless they would read back
# as another type (a number, a time, a boolean), and then it single-quotes them.
_SIMPLE_OUT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./+:@-]*(?<!:)")
_INT = re.compile(r"0|-?[1-9][0-9]*")
_FLOAT = re.compile(r"(?:0|[1-9][0-9]*)\.[0-9]+")  # read as float(raw), written as repr(value)
_KEY = re.compile(r"[a-z_]{1,64}")


def load_flat(text: str) -> dict[str, Any] | None:
    """The mapping in ``text`` when it has the flat shape; None for anything else."""
    data: dict[str, Any] = {}
    section: dict[str, Any] | None = None
    for line in text.split("\n"):
        if not line:
            continue
        match = _LINE.fullmatch(line)
        if match is None:
            return None
        nested, key, raw = match.groups()
        if plain_scalar_tag(key) != "str":  # "no:" is a boolean key to YAML
            return None
        if raw is None:
            if nested:
                return None
            section = data[key] = {}
            continue
        if nested:
            if section is None:
                return None
            target = section
        else:
            section, target = None, data
        value = _scalar(raw)
        if value is _NOT_FLAT:
            return None
        target[key] = value
    return data or None


_NOT_FLAT: Any = object()


def _scalar(raw: str) -> Any:
    if len(raw) >= 2 and raw[0] == raw[-1] == "'" and "'" not in raw[1:-1].replace("''", ""):
        return raw[1:-1].replace("''", "'")
    if not _PLAIN_IN.fullmatch(raw):
        return _NOT_FLAT
    if _FLOAT.fullmatch(raw):
        return float(raw)
    kind = plain_scalar_tag(raw)
    if kind == "str":
        return raw
    if kind == "int" and _INT.fullmatch(raw):
        return int(raw)
    if kind == "null":
        return None
    return _NOT_FLAT


def dump_flat(data: dict[str, Any]) -> str | None:
    """``data`` as PyYAML's block style writes it (``sort_keys=False``, ``allow_unicode=True``)
    when it has the flat shape; None for anything else."""
    lines: list[str] = []
    for key, value in data.items():
        if not _plain_key(key):
            return None
        if isinstance(value, dict):
            if not value:
                return None
            lines.append(f"{key}:")
            for sub, item in value.items():
                text = _scalar_text(item) if _plain_key(sub) else None
                if text is None:
                    return None
                lines.append(f"  {sub}: {text}")
            continue
        text = _scalar_text(value)
        if text is None:
            return None
        lines.append(f"{key}: {text}")
    return "\n".join(lines) + "\n" if lines else None


def _plain_key(key: Any) -> bool:
    return isinstance(key, str) and bool(_KEY.fullmatch(key)) and plain_scalar_tag(key) == "str"


def _scalar_text(value: Any) -> str | None:
    if value is None:
        return "null"
    if type(value) is int:
        return str(value)
    if type(value) is float:
        text = repr(value)
        return text if _FLOAT.fullmatch(text) else None
    if type(value) is not str:
        return None
    if not _SIMPLE_OUT.fullmatch(value):
        return None
    kind = plain_scalar_tag(value)
    if kind == "other":
        return None  # PyYAML decides whether it needs quotes
    return value if kind == "str" else f"'{value}'"  # quoted, it stays a string


# --- everything else: PyYAML ------------------------------------------------------------------


@functools.cache
def _yaml() -> tuple[Any, Any, Any]:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml, loader, dumper


def safe_load(text: str) -> Any:
    flat = load_flat(text)
    if flat is not None:
        return flat
    yaml, loader, _ = _yaml()
    return yaml.load(text, Loader=loader)


def safe_dump(data: Any, **options: Any) -> str:
    if (
        isinstance(data, dict)
        and options.get("sort_keys") is False
        and options.get("allow_unicode") is True
        and set(options) <= {"sort_keys", "allow_unicode", "width"}
    ):
        flat = dump_flat(data)
        if flat is not None:
            return flat
    yaml, _, dumper = _yaml()
    return yaml.dump(data, Dumper=dumper, **options)  # type: ignore[no-any-return]


def __getattr__(name: str) -> Any:
    if name == "YAMLError":  # read only when an error is being handled
        return _yaml()[0].YAMLError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
