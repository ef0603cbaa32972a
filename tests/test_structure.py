"""The package's shape (issue 20): no runtime import cycle inside cfopt, no private name
imported from another cfopt module, at most 12 modules directly in ``cfopt/``, none longer
than 500 lines, one ``__all__`` of at most 45 public names.

The import graph is read from the source with :mod:`ast`. Every import that runs counts,
function-local ones included (a local import only postpones a cycle to the first call);
only imports under ``if TYPE_CHECKING:`` are left out, since they never run. Importing
``a.b.c`` runs the ``__init__`` of ``a`` and ``a.b`` too, so those edges are added (except
from a package's own modules to the package, which Python has already started)."""

from __future__ import annotations

import ast
from pathlib import Path

import cfopt

PACKAGE = Path(cfopt.__file__).parent


def module_files(root: Path) -> dict[str, Path]:
    """Dotted module name -> source file, for every module under ``root`` (the ``cfopt``
    folder)."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _runtime_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Every statement of ``body`` and of its nested blocks that may run, leaving out
    the bodies of ``if TYPE_CHECKING:``."""
    found: list[ast.stmt] = []
    for node in body:
        found.append(node)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found.extend(_runtime_statements(node.orelse))
            continue
        for field in ("body", "orelse", "finalbody"):
            nested = getattr(node, field, None)
            if isinstance(nested, list):
                found.extend(_runtime_statements(nested))
        for handler in getattr(node, "handlers", []):
            found.extend(_runtime_statements(handler.body))
    return found


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The cfopt modules that running module ``name`` imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in _runtime_statements(ast.parse(path.read_text(encoding="utf-8")).body):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                found.add(submodule if submodule in modules else source)
    edges = set()
    for target in found:
        if target not in modules:
            continue
        parts = target.split(".")
        for k in range(1, len(parts) + 1):  # the packages on the way run first
            step = ".".join(parts[:k])
            if step in modules and step != name and not name.startswith(step + "."):
                edges.add(step)
    return edges


def import_cycles(root: Path) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    modules = module_files(root)
    graph = {name: imported_modules(name, path, modules) for name, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_no_runtime_import_cycles():
    assert import_cycles(PACKAGE) == []


def test_import_cycles_are_found(tmp_path):
    """The check sees a cycle made by a function-local import and one through a package's
    ``__init__``, and not one under ``TYPE_CHECKING``."""
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "a.py").write_text("def f():\n    from .b import g\n")
    (root / "b.py").write_text("from .a import f\n")
    (root / "c.py").write_text("from typing import TYPE_CHECKING\n"
                               "if TYPE_CHECKING:\n    from .d import x\n")
    (root / "d.py").write_text("from .c import y\n")
    (root / "sub" / "__init__.py").write_text("from .e import z\n")
    (root / "sub" / "e.py").write_text("from ..f import w\n")
    (root / "f.py").write_text("from .sub.e import z\n")
    assert sorted(import_cycles(root)) == [["pkg.a", "pkg.b"], ["pkg.f", "pkg.sub", "pkg.sub.e"]]


def private_imports(root: Path) -> list[str]:
    """``module: name`` for every private name (``_x``, not dunder) a module under
    ``root`` imports from a module of the package (relative imports, or absolute ones of
    ``root``'s name)."""
    found = []
    for name, path in module_files(root).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (
                    node.level or (node.module or "").split(".")[0] == root.name):
                found.extend(f"{name}: {alias.name}" for alias in node.names
                             if alias.name.startswith("_") and not alias.name.startswith("__"))
    return found


def test_no_private_names_across_modules():
    assert private_imports(PACKAGE) == []


def test_private_imports_are_found(tmp_path):
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "_impl.py").write_text("_hidden = 1\nshown = 2\n")
    (root / "a.py").write_text("from __future__ import annotations\nfrom ._impl import shown\n")
    (root / "b.py").write_text("def f():\n    from pkg._impl import _hidden\n")
    assert private_imports(root) == ["pkg.b: _hidden"]


def test_top_level_modules_and_lengths():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 12, top
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 500}
    assert not long, long


def test_one_all_of_at_most_45_names():
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    assignments = [node for node in ast.walk(tree)
                   if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
                   and "__all__" in ast.unparse(node.targets[0] if isinstance(node, ast.Assign)
                                                else node.target)]
    assert len(assignments) == 1
    assert len(cfopt.__all__) <= 45
    assert len(set(cfopt.__all__)) == len(cfopt.__all__)
    assert all(hasattr(cfopt, name) for name in cfopt.__all__)
