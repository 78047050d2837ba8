"""Safe YAML, one way. cairn writes its YAML (the marker, a change summary's front matter) as
JSON, the subset of YAML the standard library reads in C: ``dump`` writes it, and ``safe_load``
reads JSON text with ``json`` and any other YAML (written by hand) with PyYAML's safe loader
(libyaml's ``CSafeLoader`` when PyYAML was built with it), imported only then: a command that
reads only what cairn wrote never pays for PyYAML."""

from __future__ import annotations

import functools
import json

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from typing import Any


@functools.cache
def _yaml() -> tuple[Any, Any]:
    import yaml

    return yaml, getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str) -> Any:
    """The data of a YAML document: a JSON object by ``json``, anything else by PyYAML."""
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text, parse_constant=_not_json)
        except ValueError:  # a YAML flow mapping, or not valid: PyYAML reads it or says why
            pass
    yaml, loader = _yaml()
    return yaml.load(text, Loader=loader)


def _not_json(name: str) -> Any:
    """``NaN`` and ``Infinity`` are no JSON (``json`` takes them; YAML reads them as text)."""
    raise ValueError(f"{name} is not JSON")


# What JSON leaves as it is and YAML does not read as itself: DEL and the C1 controls (not
# printable in YAML), NEL and the Unicode line and paragraph separators (line breaks there), the
# byte order mark and U+FFFE, U+FFFF. Written as \u escapes, which both read.
_YAML_SAFE = {
    code: f"\\u{code:04x}" for code in (*range(0x7F, 0xA0), 0x2028, 0x2029, 0xFEFF, 0xFFFE, 0xFFFF)
}


# A number JSON writes with an exponent and no point (1e-05), which YAML 1.1 reads as text: a
# line holding it alone (indented JSON puts every value on its own line; text cannot span lines).
_EXPONENT = r'^(\s*(?:"(?:[^"\\]|\\.)*": )?-?[0-9]+)([eE][-+]?[0-9]+,?)$'


def dump(data: Any) -> str:
    """``data`` (plain: mappings, lists, text, finite numbers, booleans, None) as YAML that is
    JSON, read alike by ``json`` and any YAML reader: indented by two spaces, keys in their
    order, no final newline."""
    text = json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)
    if "e-" in text or "e+" in text:  # maybe a float such as 1e-05: as 1.0e-05, read alike
        import re

        text = re.sub(_EXPONENT, r"\1.0\2", text, flags=re.MULTILINE)
    return text if text.isascii() and "\x7f" not in text else text.translate(_YAML_SAFE)


def __getattr__(name: str) -> Any:
    if name == "YAMLError":  # read only when an error is being handled
        return _yaml()[0].YAMLError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
