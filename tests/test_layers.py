"""The package's layering (docs/design.md): no module imports a higher layer, nor a neighbour in its own layer, and
the simulator never imports torch. Function-level imports count too."""

import ast
from pathlib import Path

import chess_sim

SOURCE = Path(chess_sim.__file__).parent
LAYERS = [
    {"config", "atomic", "errors", "jsonl", "progress", "video", "__init__"},
    {"sim"},
    {"data", "policy", "report", "threads"},
    {"eval", "scheduler", "play"},
    {"runs"},
    {"imitation", "rl"},
    {"cli", "cli_args", "__main__"},
]
"""Lowest first. Within a layer, only modules of the same package, or of one of the `SHARED` sets, may import each
other."""
SHARED = (LAYERS[0], {"eval", "scheduler", "play"}, {"cli", "cli_args"})


def unit(path: Path) -> str:
    """The layering unit of a module: its top-level package, or its own name at the top level."""
    return path.relative_to(SOURCE).parts[0].removesuffix(".py")


def layer(name: str) -> int:
    return next(i for i, names in enumerate(LAYERS) if name in names)


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            # `from chess_sim.sim import host` imports the module chess_sim.sim.host
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_every_module_belongs_to_a_layer():
    for path in SOURCE.rglob("*.py"):
        assert any(unit(path) in names for names in LAYERS), path


def test_no_module_imports_a_higher_layer_or_a_neighbour():
    wrong = []
    for path in SOURCE.rglob("*.py"):
        own = unit(path)
        for name in imports(path):
            if not name.startswith("chess_sim."):
                continue
            other = name.split(".")[1]
            same_unit = other == own or any({own, other} <= group for group in SHARED)
            if layer(other) > layer(own) or (layer(other) == layer(own) and not same_unit):
                wrong.append(f"{path.relative_to(SOURCE)} imports {name}")
    assert not wrong, wrong


def test_the_simulator_never_imports_torch():
    for path in (SOURCE / "sim").rglob("*.py"):
        assert not any(name == "torch" or name.startswith("torch.") for name in imports(path)), path


def module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_import_circle_between_modules():
    """No module reaches itself through the package's imports (function-level ones too): `from chess_sim.sim import
    host` counts as an import of `chess_sim.sim.host`."""
    paths = {module_name(path): path for path in SOURCE.rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        graph[name] = sorted(imports(path) & paths.keys() - {name})
    circles = []
    done: set[str] = set()

    def visit(name: str, trail: list[str]) -> None:
        if name in trail:
            circles.append(" -> ".join(trail[trail.index(name):] + [name]))
            return
        if name in done:
            return
        for other in graph[name]:
            visit(other, trail + [name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])
    assert not circles, circles
