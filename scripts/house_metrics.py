"""The house's shape in numbers: source lines, modules, import circles, wide functions, import time.

    python scripts/house_metrics.py                 # this checkout, as JSON
    python scripts/house_metrics.py --src /tmp/old/src --json before.json

- **import circles**: strongly connected groups of ``veriscale`` modules in the graph of every
  import statement (module level, inside functions and under ``TYPE_CHECKING``: a lazy or
  typing-only import is still a dependency), found with Tarjan's algorithm;
- **wide functions**: functions and methods with more than 8 parameters (``self``/``cls`` not
  counted), outside ``veriscale.cli``;
- **import time**: the median of 5 fresh interpreters importing ``veriscale`` and
  ``veriscale.api`` (wall seconds on this machine: compare two checkouts in one run).
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

WIDE = 8


def modules(src: Path) -> dict[str, Path]:
    """Dotted name -> file, for every module and package under ``src/veriscale``."""
    found = {}
    for path in sorted((src / "veriscale").rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _targets(name: str, is_package: bool, node: ast.AST, known: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in known]
    assert isinstance(node, ast.ImportFrom)
    base = node.module or ""
    if node.level:
        package = name.split(".") if is_package else name.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join(package + ([base] if base else []))
    out = []
    for alias in node.names:
        full = f"{base}.{alias.name}"
        out.append(full if full in known else base)
    return [t for t in out if t in known]


def import_graph(known: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[name] |= {t for t in _targets(name, path.name == "__init__.py", node, known) if t != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        top = stack.pop()
                        on.discard(top)
                        group.append(top)
                        if top == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
    return sorted(found)


def wide_functions(known: dict[str, Path]) -> list[str]:
    out = []
    for name, path in known.items():
        if name.startswith("veriscale.cli"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                params = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
                params = [p for p in params if p not in ("self", "cls")]
                params += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
                if len(params) > WIDE:
                    out.append(f"{name}.{node.name} ({len(params)})")
    return sorted(out)


def import_seconds(src: Path, module: str, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(src)!r}); import {module}"],
                       check=True)
        times.append(time.perf_counter() - started)
    return round(statistics.median(times), 3)


def measure(src: Path) -> dict:
    known = modules(src)
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in known.values())
    found = circles(import_graph(known))
    wide = wide_functions(known)
    return {"src": str(src), "source_lines": lines, "modules": len(known), "import_circles": len(found),
            "circles": found, "functions_over_8_params_outside_cli": len(wide), "wide": wide,
            "import_s": {"veriscale": import_seconds(src, "veriscale"),
                         "veriscale.api": import_seconds(src, "veriscale.api")}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[1] / "src")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    out = measure(args.src.resolve())
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
