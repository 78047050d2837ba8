"""Safe YAML, one way: PyYAML's safe loader and dumper (libyaml's C ``CSafeLoader`` and
``CSafeDumper`` when PyYAML was built with them), imported on first use, so that a command that
reads no YAML does not pay for it."""

from __future__ import annotations

import functools

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
    yaml, loader, _ = _yaml()
    return yaml.load(text, Loader=loader)


def safe_dump(data: Any, **options: Any) -> str:
    yaml, _, dumper = _yaml()
    return yaml.dump(data, Dumper=dumper, **options)  # type: ignore[no-any-return]


def __getattr__(name: str) -> Any:
    if name == "YAMLError":  # read only when an error is being handled
        return _yaml()[0].YAMLError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
