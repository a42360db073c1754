"""The command line's building blocks: one-line usage errors, argparse value types, the shared backend options,
and flags generated from the configuration dataclasses (one flag per field, its docstring as help, its default
from the dataclass or a named profile, `--x/--no-x` for booleans, choices for `Literal` fields)."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import re
import typing

from chess_sim.config import BACKENDS, replace_fields
from chess_sim.config.base import describe_range


class UsageError(Exception):
    """Bad input from the user: reported in one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", functools.partial(argparse.HelpFormatter, max_help_position=32))
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # argparse's own errors, in our one-line form
        raise UsageError(message)


def whole(minimum: int):
    """argparse type: a whole number >= minimum, with a one-line message otherwise."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected a number >= {minimum}, got {value}")
        return value
    return parse


positive = whole(1)
non_negative = whole(0)


def fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {value}")
    return value


def seed(text: str) -> int:
    value = non_negative(text.replace("_", ""))
    if value >= 2**63:
        raise argparse.ArgumentTypeError(f"seed too large: {value}")
    return value


def add_backend(command: argparse.ArgumentParser) -> None:
    command.add_argument("--backend", choices=BACKENDS, default="local",
                         help="simulators in local worker processes, or as Ray actors (a local Ray instance unless "
                              "--ray-address)")
    command.add_argument("--ray-address", metavar="auto|HOST:PORT",
                         help="join this Ray cluster (implies --backend ray); auto: the one `ray start` began here")


def add_trust_remote_code(command: argparse.ArgumentParser) -> None:
    command.add_argument("--trust-remote-code", action=argparse.BooleanOptionalAction, default=False,
                         help="let a LeRobot checkpoint's processor files import and run code outside LeRobot's "
                              "registered steps (only for checkpoints whose author you trust) [default: false]")


def backend_of(args: argparse.Namespace) -> str:
    """The simulator backend asked for; joins (or starts) the Ray cluster first, so a bad address fails before any
    work is done."""
    if args.backend != "ray" and args.ray_address is None:
        return "local"
    from chess_sim.sim.ray_env import RayBackendError, connect

    try:
        connect(args.ray_address)
    except RayBackendError as error:
        raise UsageError(str(error)) from None
    return "ray"


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def noise(text: str) -> tuple[float, float]:
    try:
        start, end = (float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected START,END noise sizes such as 0.2,0.002, got {text!r}") from None
    if not (start > 0 and end > 0):
        raise argparse.ArgumentTypeError(f"noise sizes must be positive, got {text!r}")
    return start, end


@functools.cache
def field_docs(cls) -> dict[str, str]:
    """A config dataclass's field docstrings (the string literal under each field), by field name."""
    body = ast.parse(inspect.getsource(cls)).body[0].body
    return {node.target.id: following.value.value for node, following in zip(body, body[1:])
            if isinstance(node, ast.AnnAssign) and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)}


def leaf_fields(cls, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], type, object]]:
    """(path, owning class, field) of every non-dataclass field of a config tree, in declaration order: a
    nested config (`RLConfig.run`) contributes its own fields under its name."""
    hints = _hints(cls)
    leaves = []
    for field in dataclasses.fields(cls):
        kind = hints[field.name]
        if dataclasses.is_dataclass(kind):
            leaves.extend(leaf_fields(kind, (*prefix, field.name)))
        else:
            leaves.append(((*prefix, field.name), cls, field))
    return leaves


@functools.cache
def _hints(cls) -> dict:
    return typing.get_type_hints(cls)


def _value(config, path: tuple[str, ...]):
    for name in path:
        config = getattr(config, name)
    return config


def _flag_type(kind, name: str):
    if name.endswith("seed"):
        return {"type": seed}
    if typing.get_origin(kind) is typing.Literal:
        return {"choices": typing.get_args(kind)}
    return {"type": {int: non_negative, float: non_negative_float, str: str}[kind]}


def add_config_flags(command: argparse.ArgumentParser, cls, profiles: dict[str, object] | None = None,
                     rename: dict[str, str] | None = None, skip: tuple[str, ...] = (),
                     custom: dict[str, dict] | None = None) -> None:
    """One flag per field of the config tree `cls`, grouped by nested config. Without `profiles` a flag's default
    is the dataclass's; with them it is None (the chosen profile fills it in, `config_from_args`) and the help lists
    the dataclass's default and each profile's value that differs from it. `rename` maps a field to another flag
    name, `custom` replaces a field's argparse keywords (type, nargs, ...), `skip` leaves fields out."""
    rename, custom = rename or {}, custom or {}
    default_config = cls()
    groups: dict[tuple[str, ...], argparse._ArgumentGroup] = {}
    for path, owner, field in leaf_fields(cls):
        if field.name in skip:
            continue
        group = command
        if len(path) > 1:
            if path[:-1] not in groups:
                groups[path[:-1]] = command.add_argument_group(f"{' '.join(path[:-1])} ({owner.__name__})",
                                                               _first_sentence(owner.__doc__ or ""))
            group = groups[path[:-1]]
        flag = "--" + rename.get(field.name, field.name).replace("_", "-")
        kind = _hints(owner)[field.name]
        default = _value(default_config, path)
        if profiles:  # the dataclass default, and each profile that differs from it
            values = {name: _value(profile, path) for name, profile in profiles.items()}
            shown = "".join(f"; {name} {_show(value)}" for name, value in values.items() if value != default)
            suffix = f" [default: {_show(default)}{shown}]"
        else:
            suffix = f" [default: {_show(default)}]"
        valid = getattr(owner, "RANGES", {}).get(field.name)
        if valid is not None:
            suffix = f" [range: {describe_range(valid).removeprefix('in ')}]" + suffix
        help_text = (field_docs(owner).get(field.name, "") + suffix).replace("%", "%%")
        keywords = {"dest": field.name, "default": None if profiles else default, "help": help_text}
        if field.name in custom:
            keywords.update(custom[field.name])
        elif kind is bool:
            keywords["action"] = argparse.BooleanOptionalAction
        else:
            keywords.update(_flag_type(kind, field.name))
        if kind is not bool and "choices" not in keywords:
            keywords.setdefault("metavar", flag[2:].replace("-", "_").upper())
        group.add_argument(flag, **keywords)


def _first_sentence(text: str) -> str:
    return re.split(r"(?<=\.)\s", " ".join(text.split()), maxsplit=1)[0]


def _show(value) -> str:
    return "none" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def config_from_args(cls, args: argparse.Namespace, base=None, rename: dict[str, str] | None = None):
    """The config tree `cls` built from `base` (default: the dataclass defaults) with every flag the user gave
    (not None) put in; a value the config refuses is a `UsageError` naming its flag."""
    names = [field.name for _, _, field in leaf_fields(cls)]
    given = {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}
    try:
        return replace_fields(base if base is not None else cls(), **given)
    except ValueError as error:
        pattern = r"\b(" + "|".join(sorted(names, key=len, reverse=True)) + r")\b"
        rename = rename or {}
        raise UsageError(re.sub(pattern, lambda m: "--" + rename.get(m[1], m[1]).replace("_", "-"), str(error))) \
            from None
