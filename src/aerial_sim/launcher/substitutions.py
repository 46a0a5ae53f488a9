"""``$(name arg ...)`` substitutions of the ROS 2 launch frontends, parsed and evaluated.

The syntax follows ``launch/frontend/grammar.lark`` of ros2/launch: text with
embedded ``$(IDENTIFIER args...)``; arguments are separated by single spaces and
are either unquoted (no spaces, quotes or parentheses) or single/double quoted;
substitutions nest anywhere inside arguments; a backslash escapes the next
character. Outside a substitution, quotes are plain text.

Parsing gives a tuple of parts (``str`` for text, :class:`Substitution` for the
rest); :func:`evaluate` turns parts into a string against a
:class:`SubstitutionContext`. Supported names: ``var``, ``env``, ``optenv``,
``find-pkg-share``, ``find-pkg-prefix``, ``dirname``, ``filename``, ``anon``,
``not``, ``and``, ``or``, ``equals``, ``not-equals``. Anything else is a
:class:`LaunchError` that names it.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Protocol, Union

from aerial_sim.launcher.errors import LaunchError


@dataclass(frozen=True)
class Substitution:
    """``$(name arg1 arg2 ...)``; each argument is itself a tuple of parts."""

    name: str
    args: tuple[tuple["Part", ...], ...]


Part = Union[str, Substitution]


class SubstitutionContext(Protocol):
    """What evaluating a substitution may look at."""

    configurations: Mapping[str, str]
    environ: Mapping[str, str]
    current_file: Path

    def find_package_share(self, package: str) -> Path: ...

    def find_package_prefix(self, package: str) -> Path: ...


def parse(text: str) -> tuple[Part, ...]:
    """Parse ``text`` into parts; raises :class:`LaunchError` on bad syntax."""
    return _Parser(text).template()


def has_substitutions(parts: tuple[Part, ...]) -> bool:
    return any(isinstance(part, Substitution) for part in parts)


def evaluate(parts: tuple[Part, ...], context: SubstitutionContext) -> str:
    """Evaluate parsed parts to a string."""
    return "".join(part if isinstance(part, str) else _perform(part, context) for part in parts)


def substitute(text: str, context: SubstitutionContext) -> str:
    """Parse and evaluate in one step."""
    return evaluate(parse(text), context)


def to_bool(text: str, what: str) -> bool:
    """Launch's boolean rule: 'true'/'1' and 'false'/'0' (case-insensitive), nothing else."""
    lowered = text.strip().lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise LaunchError(f"{what}: expected true or false, got '{text}'")


class _Parser:
    """Recursive-descent parser for the launch substitution grammar."""

    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def error(self, message: str) -> LaunchError:
        return LaunchError(f"bad substitution syntax in '{self.text}' at column {self.pos + 1}: {message}")

    def peek(self, count: int = 1) -> str:
        return self.text[self.pos : self.pos + count]

    def template(self) -> tuple[Part, ...]:
        """The whole text as literal parts and substitutions."""
        return self.until(lambda _character: False)

    def substitution(self) -> Substitution:
        self.pos += 2  # "$("
        start = self.pos
        while self.pos < len(self.text) and (self.peek().isalnum() or self.peek() in "_-"):
            self.pos += 1
        name = self.text[start : self.pos]
        if not name or not name[0].isalpha():
            raise self.error("expected a substitution name after '$('")
        args: list[tuple[Part, ...]] = []
        while True:
            if self.pos >= len(self.text):
                raise self.error(f"unterminated $({name} ...")
            char = self.peek()
            if char == ")":
                self.pos += 1
                return Substitution(name, tuple(args))
            if char != " ":
                raise self.error(f"expected a space or ')' in $({name} ...)")
            while self.peek() == " ":
                self.pos += 1
            if self.peek() != ")":
                args.append(self.argument())

    def argument(self) -> tuple[Part, ...]:
        quote = self.peek()
        if quote in ("'", '"'):
            self.pos += 1
            parts = self.until(lambda c: c == quote)
            if self.peek() != quote:
                raise self.error(f"unterminated {quote}-quoted argument")
            self.pos += 1
            return parts
        parts = self.until(lambda c: c in " )")
        if not parts:
            raise self.error("empty argument")
        return parts

    def until(self, stop: Callable[[str], bool]) -> tuple[Part, ...]:
        parts: list[Part] = []
        buffer: list[str] = []
        while self.pos < len(self.text) and not stop(self.peek()):
            if self.peek(2) == "$(":
                _flush(buffer, parts)
                parts.append(self.substitution())
            elif self.peek() == "\\" and self.pos + 1 < len(self.text):
                buffer.append(self.text[self.pos + 1])
                self.pos += 2
            else:
                buffer.append(self.peek())
                self.pos += 1
        _flush(buffer, parts)
        return tuple(parts)


def _flush(buffer: list[str], parts: list[Part]) -> None:
    if buffer:
        parts.append("".join(buffer))
        buffer.clear()


def _perform(substitution: Substitution, context: SubstitutionContext) -> str:
    handler = _HANDLERS.get(substitution.name)
    if handler is None:
        known = ", ".join(sorted(_HANDLERS))
        raise LaunchError(f"unsupported substitution '$({substitution.name} ...)' (supported: {known})")
    args = [evaluate(arg, context) for arg in substitution.args]
    low, high = _ARITY[substitution.name]
    if not low <= len(args) <= high:
        expected = str(low) if low == high else f"{low} to {high}"
        raise LaunchError(f"$({substitution.name} ...) takes {expected} argument(s), got {len(args)}")
    return handler(context, args)


def _var(context: SubstitutionContext, args: list[str]) -> str:
    name = args[0]
    if name in context.configurations:
        return context.configurations[name]
    if len(args) == 2:
        return args[1]
    raise LaunchError(f"unknown launch argument '{name}' in $(var {name}) (declare it with 'arg' or 'let')")


def _env(context: SubstitutionContext, args: list[str]) -> str:
    name = args[0]
    if name in context.environ:
        return context.environ[name]
    if len(args) == 2:
        return args[1]
    raise LaunchError(f"environment variable '{name}' is not set in $(env {name}) (give a default: $(env {name} VALUE))")


def _optenv(context: SubstitutionContext, args: list[str]) -> str:
    return context.environ.get(args[0], args[1] if len(args) == 2 else "")


def _boolean(name: str) -> Callable[[SubstitutionContext, list[str]], str]:
    def handler(context: SubstitutionContext, args: list[str]) -> str:
        values = [to_bool(arg, f"$({name} ...)") for arg in args]
        result = {"not": lambda: not values[0], "and": lambda: all(values), "or": lambda: any(values)}[name]()
        return "true" if result else "false"

    return handler


_HANDLERS: dict[str, Callable[[SubstitutionContext, list[str]], str]] = {
    "var": _var,
    "env": _env,
    "optenv": _optenv,
    "find-pkg-share": lambda context, args: str(context.find_package_share(args[0])),
    "find-pkg-prefix": lambda context, args: str(context.find_package_prefix(args[0])),
    "dirname": lambda context, args: str(context.current_file.parent),
    "filename": lambda context, args: str(context.current_file),
    "anon": lambda context, args: f"{args[0]}_{secrets.token_hex(4)}",
    "not": _boolean("not"),
    "and": _boolean("and"),
    "or": _boolean("or"),
    "equals": lambda context, args: "true" if args[0] == args[1] else "false",
    "not-equals": lambda context, args: "true" if args[0] != args[1] else "false",
}

_ARITY: dict[str, tuple[int, int]] = {
    "var": (1, 2),
    "env": (1, 2),
    "optenv": (1, 2),
    "find-pkg-share": (1, 1),
    "find-pkg-prefix": (1, 1),
    "dirname": (0, 0),
    "filename": (0, 0),
    "anon": (1, 1),
    "not": (1, 1),
    "and": (2, 2),
    "or": (2, 2),
    "equals": (2, 2),
    "not-equals": (2, 2),
}
