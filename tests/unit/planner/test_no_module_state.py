"""No module of the planner's pure domain holds state of its own.

Planning is a function of its inputs (the owner, the planning context, ``now``): a module
that kept a dict, a list or a cache across calls would make a plan depend on what was
planned before in the same process, which a fresh planner, another replica and replay
would not reproduce. Values kept from one plan to the next belong to the
``PlanningContext`` the caller passes in.
"""

from __future__ import annotations

import ast
import collections
import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

import kaiwo_planner.domain

MUTABLE_TYPES = (
    dict,
    list,
    set,
    bytearray,
    collections.OrderedDict,
    collections.defaultdict,
    collections.deque,
    collections.Counter,
)
CACHING_DECORATORS = frozenset({"cache", "lru_cache", "cached_property"})


def domain_modules() -> list[ModuleType]:
    package = kaiwo_planner.domain
    names = [
        info.name for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}.")
    ]
    return [package, *(importlib.import_module(name) for name in sorted(names))]


def test_the_scan_finds_every_sub_package() -> None:
    found = {module.__name__ for module in domain_modules()}
    assert {
        "kaiwo_planner.domain.planning",
        "kaiwo_planner.domain.state.planning_context",
        "kaiwo_planner.domain.children.workload_children",
        "kaiwo_planner.domain.models.model_plan",
        "kaiwo_planner.domain.queues.queue_config",
        "kaiwo_planner.domain.scheduling.preemption",
        "kaiwo_planner.domain.status.workload_status",
    } <= found


def test_no_domain_module_holds_a_mutable_container() -> None:
    held = [
        f"{module.__name__}.{name}: {type(value).__name__}"
        for module in domain_modules()
        for name, value in vars(module).items()
        if isinstance(value, MUTABLE_TYPES) and not _dunder(name)
    ]
    assert held == []


def _dunder(name: str) -> bool:
    # __builtins__, __path__, __all__...: the interpreter's, not the module's state.
    return name.startswith("__") and name.endswith("__")


def _decorator_name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute):
        return target.attr
    return target.id if isinstance(target, ast.Name) else ""


def test_no_domain_function_caches_or_rebinds_module_state() -> None:
    found = []
    for module in domain_modules():
        source = Path(str(module.__file__)).read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Global):
                found.append(f"{module.__name__}: global {', '.join(node.names)}")
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names = {_decorator_name(d) for d in node.decorator_list}
                found += [
                    f"{module.__name__}.{node.name}: @{n}" for n in names & CACHING_DECORATORS
                ]
    assert found == []


def test_the_scan_would_see_a_module_cache() -> None:
    # The checks above are only as good as what they detect: a module like the one the
    # planner used to have is caught by both.
    source = "import functools\n_KEPT = {}\n@functools.lru_cache\ndef f(x):\n    global _KEPT\n"
    module = ModuleType("example")
    exec(compile(source, "example", "exec"), module.__dict__)
    held = [n for n, v in vars(module).items() if isinstance(v, MUTABLE_TYPES) and not _dunder(n)]
    assert held == ["_KEPT"]
    tree = ast.parse(source)
    assert any(isinstance(node, ast.Global) for node in ast.walk(tree))
    function = next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef))
    assert {_decorator_name(d) for d in function.decorator_list} == {"lru_cache"}
