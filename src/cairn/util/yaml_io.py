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
def _yaml() -> tuple[Any, Any, Any]:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml, loader, dumper


def safe_load(text: str) -> Any:
    """The data of a YAML document: a JSON object by ``json``, anything else by PyYAML."""
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text, parse_constant=_not_json)
        except ValueError:  # a YAML flow mapping, or not valid: PyYAML reads it or says why
            pass
    yaml, loader, _ = _yaml()
    return yaml.load(text, Loader=loader)


def _not_json(name: str) -> Any:
    """``NaN`` and ``Infinity`` are no JSON (``json`` takes them; YAML reads them as text)."""
    raise ValueError(f"{name} is not JSON")


def dump(data: Any) -> str:
    """``data`` (plain: mappings, lists, text, numbers, booleans, None) as YAML that is JSON:
    indented by two spaces, keys in their order, no final newline."""
    return json.dumps(data, indent=2, ensure_ascii=False)


def safe_dump(data: Any, **options: Any) -> str:
    yaml, _, dumper = _yaml()
    return yaml.dump(data, Dumper=dumper, **options)  # type: ignore[no-any-return]


def __getattr__(name: str) -> Any:
    if name == "YAMLError":  # read only when an error is being handled
        return _yaml()[0].YAMLError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
