"""No import circles among veriscale's modules: every import counts (module level, inside a
function, under TYPE_CHECKING), as ``scripts/house_metrics.py`` counts them."""

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _metrics():
    spec = importlib.util.spec_from_file_location("house_metrics", REPO / "scripts" / "house_metrics.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_module_imports_itself_through_others():
    m = _metrics()
    found = m.circles(m.import_graph(m.modules(REPO / "src")))
    assert found == [], ("import circles (break each with a protocol for what one side needs, or by moving "
                         f"the shared piece below both): {found}")


def test_the_counter_finds_a_circle_it_is_shown():
    m = _metrics()
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert m.circles(graph) == [["a", "b", "c"]]
