"""The layout is the architecture: no import cycles, imports only down the layers that
docs/architecture.md lists, and no module over 400 lines.

Every ``import`` counts, at module level or inside a function, ``TYPE_CHECKING`` ones too. The
checker is tested on small synthetic packages below, so a new violation makes it fail.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "src"
DOC = ROOT / "docs" / "architecture.md"

MAX_LINES = 400
PARSER_MAX_LINES = 450
# Parsers of one format each, allowed up to PARSER_MAX_LINES.
PARSERS = frozenset({"cairn.summary.parse", "cairn.run.plan.markdown", "cairn.run.plan.structured"})

# Known violations, each with the reason it is tolerated; an entry that no longer matches a
# violation fails the test. Both are empty: keep them so.
ALLOWED_UPWARD: frozenset[tuple[str, str]] = frozenset()
ALLOWED_LONG: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int

    def __str__(self) -> str:
        return f"{self.importer}:{self.line} imports {self.imported}"


def modules(source: Path, package: str) -> dict[str, Path]:
    """Dotted module name → file, for every module of ``package`` under ``source``."""
    found = {}
    for path in sorted((source / package).rglob("*.py")):
        parts = path.relative_to(source).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(source: Path, package: str) -> list[Import]:
    """Every import of one of ``package``'s own modules by another, wherever it is written."""
    known = modules(source, package)
    found: list[Import] = []
    for name, path in known.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    stem = here.split(".")[: len(here.split(".")) - node.level + 1]
                    base = ".".join([*stem, base] if base else stem)
                targets = [f"{base}.{alias.name}" for alias in node.names]
                targets = [t if t in known else base for t in targets]
            else:
                continue
            for target in targets:
                module = _longest_known(target, known)
                if module is not None and module != name:
                    found.append(Import(name, module, node.lineno))
    return found


def _longest_known(dotted: str, known: dict[str, Path]) -> str | None:
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known:
            return candidate
    return None


def unit(module: str) -> str:
    """What a layer holds: a top-level module or package; ``__init__`` for the root package."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def cycles(found: Iterable[Import]) -> list[list[str]]:
    """The import cycles among modules, each as the modules in it (Tarjan's SCC)."""
    graph: dict[str, set[str]] = {}
    for edge in found:
        graph.setdefault(edge.importer, set()).add(edge.imported)
        graph.setdefault(edge.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return result


def upward(found: Iterable[Import], layers: dict[str, int]) -> list[Import]:
    """Imports from one top-level unit to another that is not on a lower layer."""
    return [
        edge
        for edge in found
        if unit(edge.importer) != unit(edge.imported)
        and layers[unit(edge.imported)] >= layers[unit(edge.importer)]
    ]


def too_long(known: dict[str, Path], parsers: frozenset[str]) -> dict[str, int]:
    """Modules over their limit → their line count."""
    counts = {name: len(path.read_text().splitlines()) for name, path in known.items()}
    return {
        name: count
        for name, count in counts.items()
        if count > (PARSER_MAX_LINES if name in parsers else MAX_LINES)
    }


def read_layers(doc: Path) -> dict[str, int]:
    """The layer of every unit, from the table under the doc's "## Layers" heading:
    ``| 2 | `config`, `git`, `tickets` | … |``."""
    text = doc.read_text().split("\n## Layers", 1)[1].split("\n## ", 1)[0]
    layers: dict[str, int] = {}
    for line in text.splitlines():
        row = re.match(r"\|\s*(\d+)\s*\|([^|]*)\|", line)
        if row:
            for name in re.findall(r"`(\w+)`", row.group(2)):
                assert name not in layers, f"{name} is in two layers of {doc.name}"
                layers[name] = int(row.group(1))
    assert layers, f"no layer table under '## Layers' in {doc}"
    return layers


def command_targets() -> dict[str, str]:
    """The command table's ``"module:function"`` strings, by command: each handler, and what it
    starts early. Point it at the table the command line dispatches from."""
    from cairn.cli.commands import COMMANDS

    found: dict[str, str] = {}
    for path, command in COMMANDS.items():
        name = " ".join(path)
        found[name] = command.target
        if command.early is not None:
            found[f"{name} (early)"] = command.early
    return found


def tables() -> list[tuple[str, dict[str, str]]]:
    """Every table of ``"module:attribute"`` strings, with the module that holds it."""
    from cairn.agents import ADAPTERS
    from cairn.cli.handlers.engines import ENGINES

    adapters = {kind: spec for kind, spec in ADAPTERS.items() if isinstance(spec, str)}
    return [
        ("cairn.cli.commands", command_targets()),
        ("cairn.agents", adapters),
        ("cairn.cli.handlers.engines", ENGINES),
    ]


def pointing_up(holder: str, table: dict[str, str], layers: dict[str, int]) -> list[str]:
    """The entries of ``holder``'s table that name a module of a unit other than the holder's
    own, on the holder's layer or above."""
    return [
        f"{holder}: {key} -> {spec}"
        for key, spec in table.items()
        if unit(spec.partition(":")[0]) != unit(holder)
        and layers.get(unit(spec.partition(":")[0]), len(layers)) >= layers[unit(holder)]
    ]


def unresolved(table: dict[str, str]) -> list[str]:
    """The entries that are not ``module:attribute`` of an importable module."""
    bad = []
    for key, spec in table.items():
        module, colon, name = spec.partition(":")
        try:
            if not colon or not hasattr(importlib.import_module(module), name):
                bad.append(f"{key} -> {spec}")
        except ImportError as exc:
            bad.append(f"{key} -> {spec}: {exc}")
    return bad


# --- the rules, applied to cairn ------------------------------------------------------------


@pytest.fixture(scope="module")
def cairn_imports() -> list[Import]:
    return imports(SOURCE, "cairn")


def test_no_import_cycles(cairn_imports: list[Import]) -> None:
    assert cycles(cairn_imports) == []


def test_every_package_and_module_has_a_layer() -> None:
    layers = read_layers(DOC)
    units = {unit(name) for name in modules(SOURCE, "cairn")}
    assert units - set(layers) == set(), "add them to the table in docs/architecture.md"
    assert set(layers) - units == set(), "docs/architecture.md names units that do not exist"


# Packages that build on others: (upper, lower) means upper's layer is above lower's.
BUILDS_ON = (("scale", "fleet"), ("fleet", "state"), ("cli", "scale"))


def test_packages_that_build_on_others_are_above_them() -> None:
    """``scale`` runs the fleet's tickets on Temporal with the fleet's records, rows and child
    runs: it sits above ``fleet``, not beside it, so it imports them instead of copying them."""
    layers = read_layers(DOC)
    below = [(upper, lower) for upper, lower in BUILDS_ON if layers[upper] <= layers[lower]]
    assert below == [], "docs/architecture.md's layer table puts these beside or below"


def test_table_strings_point_down_the_layers() -> None:
    layers = read_layers(DOC)
    found = [entry for holder, table in tables() for entry in pointing_up(holder, table, layers)]
    assert found == []


def test_table_strings_name_existing_attributes() -> None:
    assert [entry for _, table in tables() for entry in unresolved(table)] == []
    assert all(table for _, table in tables()), "a table read as empty checks nothing"


def test_the_doc_names_the_same_parsers() -> None:
    rule = DOC.read_text().split("a parser of one format", 1)[1].split("may reach", 1)[0]
    assert set(re.findall(r"`(cairn\.[\w.]+)`", rule)) == PARSERS


def test_imports_point_down_the_layers(cairn_imports: list[Import]) -> None:
    found = upward(cairn_imports, read_layers(DOC))
    unexpected = [str(e) for e in found if (e.importer, e.imported) not in ALLOWED_UPWARD]
    assert unexpected == []


def test_no_module_over_400_lines() -> None:
    over = too_long(modules(SOURCE, "cairn"), PARSERS)
    assert {name: n for name, n in over.items() if name not in ALLOWED_LONG} == {}


def test_allow_lists_name_only_live_violations(cairn_imports: list[Import]) -> None:
    """Once a violation is fixed, its entry goes, so it cannot come back unnoticed."""
    found = {(e.importer, e.imported) for e in upward(cairn_imports, read_layers(DOC))}
    assert ALLOWED_UPWARD - found == set()
    assert ALLOWED_LONG - set(too_long(modules(SOURCE, "cairn"), PARSERS)) == set()
    assert PARSERS - set(modules(SOURCE, "cairn")) == set()


# --- the checker finds what it is meant to find -----------------------------------------------


def make_package(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / "pkg" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_checker_sees_imports_in_every_form(tmp_path: Path) -> None:
    source = make_package(
        tmp_path,
        {
            "__init__.py": "",
            "low.py": "import os\n",
            "sub/__init__.py": "from pkg import low\n",
            "sub/a.py": "from . import b\nfrom ..low import x\n",
            "sub/b.py": "def f():\n    import pkg.low\n    from pkg.sub import a\n",
        },
    )
    edges = {(e.importer, e.imported, e.line) for e in imports(source, "pkg")}
    assert edges == {
        ("pkg.sub", "pkg.low", 1),
        ("pkg.sub.a", "pkg.sub.b", 1),
        ("pkg.sub.a", "pkg.low", 2),
        ("pkg.sub.b", "pkg.low", 2),
        ("pkg.sub.b", "pkg.sub.a", 3),
    }
    assert cycles(imports(source, "pkg")) == [["pkg.sub.a", "pkg.sub.b"]]


def test_checker_finds_upward_imports_and_long_modules(tmp_path: Path) -> None:
    source = make_package(
        tmp_path,
        {
            "__init__.py": "",
            "base.py": "def f():\n    from pkg.top import main\n",
            "top.py": "from pkg import base\n" + "x = 1\n" * 400,
            "parse.py": "x = 1\n" * 450,
        },
    )
    found = imports(source, "pkg")
    layers = {"__init__": 0, "base": 0, "top": 1, "parse": 0}
    assert [str(e) for e in upward(found, layers)] == ["pkg.base:2 imports pkg.top"]
    assert upward(found, {**layers, "top": 0}) != []  # the same layer is not "down"
    known = modules(source, "pkg")
    assert too_long(known, frozenset()) == {"pkg.top": 401, "pkg.parse": 450}
    assert too_long(known, frozenset({"pkg.parse"})) == {"pkg.top": 401}


def test_checker_finds_table_strings_pointing_up_or_nowhere() -> None:
    layers = {"__init__": 0, "low": 1, "mid": 2, "top": 3}
    table = {"a": "pkg.low.x:f", "b": "pkg.mid.y:g", "c": "pkg.top:h", "d": "pkg.mid:k"}
    assert pointing_up("pkg.mid.t", table, layers) == ["pkg.mid.t: c -> pkg.top:h"]
    assert pointing_up("pkg.low", table, layers) == [
        "pkg.low: b -> pkg.mid.y:g",
        "pkg.low: c -> pkg.top:h",
        "pkg.low: d -> pkg.mid:k",
    ]
    found = unresolved({"ok": "json:dumps", "attr": "json:nothing", "mod": "no_such_mod:f"})
    assert found[0] == "attr -> json:nothing"
    assert found[1].startswith("mod -> no_such_mod:f: ")
    assert unresolved({"colon": "json"}) == ["colon -> json"]


def test_layer_table_is_read_from_the_doc(tmp_path: Path) -> None:
    doc = tmp_path / "architecture.md"
    doc.write_text(
        "# A\n\n## Layers\n\n| layer | units |\n|---|---|\n| 1 | `util` |\n"
        "| 0 | `terms`, `errors` |\n\n## Packages\n\n| 9 | `not_a_layer` |\n"
    )
    assert read_layers(doc) == {"util": 1, "terms": 0, "errors": 0}
