"""Safe YAML with libyaml's C loader and dumper when PyYAML was built with them (5-10x faster)."""

from __future__ import annotations

import functools
from typing import Any

import yaml

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

YAMLError = yaml.YAMLError


def safe_load(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)


def safe_dump(data: Any, **options: Any) -> str:
    text: str = yaml.dump(data, Dumper=_Dumper, **options)
    return text


_resolver = yaml.resolver.Resolver()


@functools.lru_cache(maxsize=4096)
def plain_scalar_tag(value: str) -> str:
    """The type YAML gives an unquoted scalar: ``str``, ``int``, ``null``, ``bool``, …"""
    tag: str = _resolver.resolve(yaml.nodes.ScalarNode, value, (True, False))  # type: ignore[no-untyped-call]
    return tag.rsplit(":", 1)[-1]
