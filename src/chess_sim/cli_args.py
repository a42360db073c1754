"""The command line's building blocks: one-line usage errors, argparse value types and the shared backend options."""

from __future__ import annotations

import argparse

from chess_sim.config import BACKENDS


class UsageError(Exception):
    """Bad input from the user: reported in one line, exit code 2."""


class Parser(argparse.ArgumentParser):
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


def field_help(cls, name: str) -> str:
    """A config field's docstring, for --help."""
    import ast
    import inspect

    body = ast.parse(inspect.getsource(cls)).body[0].body
    for node, following in zip(body, body[1:]):
        if isinstance(node, ast.AnnAssign) and node.target.id == name and isinstance(following, ast.Expr):
            return following.value.value.replace("%", "%%")
    return ""


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
