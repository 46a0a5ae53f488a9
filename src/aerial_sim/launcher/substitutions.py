"""``$(name arg ...)`` substitutions of the ROS 2 launch frontends, parsed and evaluated.

The syntax and the results are those of ros2/launch (``launch/frontend/grammar.lark``
and the substitution classes; checked against launch 3.7.1 in
``test/test_launcher_conformance.py``):

- Text outside a substitution is literal (quotes included); a backslash escapes
  the next character (``\\$(`` is the literal text ``$(``).
- ``$(NAME)`` or ``$(NAME ARG ARG ...)``: arguments are separated by exactly one
  space, with none after the last. An argument is either unquoted text and
  substitutions written together (no spaces, quotes or parentheses unless
  escaped), or one whole ``'...'`` or ``"..."`` text in which spaces are kept
  and substitutions may appear; inside a quoted text the other quote character
  is an ordinary character and nested substitutions take unquoted arguments.
- An empty quoted argument (``''`` or ``""``) is an empty list of substitutions:
  it evaluates to the empty string, except that ``$(equals)`` and
  ``$(not-equals)`` compare it as the text ``[]`` (ros2/launch applies ``str()``
  to it), and ``$(not)``/``$(and)``/``$(or)`` reject it. So
  ``$(not-equals '$(var x)' '')`` is true even when ``x`` is empty: launch files
  should compare with a word (``$(not-equals $(var mission) none)``).
- ``$(equals A B)``: two boolean words (true/false/1/0, any case) compare as
  booleans, two numbers compare with ``math.isclose``, anything else as text.
- ``$(not)``, ``$(and)``, ``$(or)`` read ``1``/``0`` and YAML booleans
  (true/false/yes/no/on/off in any of YAML's spellings); anything else is an error.

Parsing gives a tuple of parts (``str`` for text, :class:`Substitution` for the
rest); :func:`evaluate` turns parts into a string against a
:class:`SubstitutionContext`. Supported names: ``var``, ``env``,
``find-pkg-share``, ``find-pkg-prefix``, ``dirname``, ``filename``, ``anon``,
``not``, ``and``, ``or``, ``equals``, ``not-equals``. Anything else (ros2/launch
also has ``eval``, ``command``, ``find-exec``, ...) is a :class:`LaunchError`
that names it.
"""

from __future__ import annotations

import math
import os
import random
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, MutableMapping, Protocol, Union

import yaml

from aerial_sim.launcher.errors import LaunchError


@dataclass(frozen=True)
class Substitution:
    """``$(name arg1 arg2 ...)``; each argument is itself a tuple of parts (empty for ``''``)."""

    name: str
    args: tuple[tuple["Part", ...], ...]


Part = Union[str, Substitution]


class SubstitutionContext(Protocol):
    """What evaluating a substitution may look at (``configurations`` takes ``$(anon)`` names too)."""

    configurations: MutableMapping[str, str]
    environ: MutableMapping[str, str]
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
    """The rule of ``if``/``unless``: 'true'/'1' and 'false'/'0' (any case, stripped), nothing else."""
    lowered = text.strip().lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise LaunchError(f"{what}: expected true or false, got '{text}'")


#: Characters an unquoted argument cannot contain unescaped (``$`` only as ``$(``).
_UNQUOTED_STOP = " '\"()\\"


class _Parser:
    """Recursive-descent parser for the launch substitution grammar."""

    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def error(self, message: str) -> LaunchError:
        return LaunchError(f"bad substitution syntax in '{self.text}' at column {self.pos + 1}: {message}")

    def peek(self, count: int = 1) -> str:
        return self.text[self.pos : self.pos + count]

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def template(self) -> tuple[Part, ...]:
        """The whole text: literal text (backslash escapes) and substitutions."""
        parts: list[Part] = []
        buffer: list[str] = []
        while not self.at_end():
            if self.peek(2) == "$(":
                _flush(buffer, parts)
                parts.append(self.substitution(quote=None))
            else:
                self.take_character(buffer)
        _flush(buffer, parts)
        return tuple(parts)

    def take_character(self, buffer: list[str]) -> None:
        """One literal character; a backslash takes the next character literally."""
        if self.peek() == "\\" and self.pos + 1 < len(self.text):
            buffer.append(self.text[self.pos + 1])
            self.pos += 2
        else:
            buffer.append(self.peek())
            self.pos += 1

    def substitution(self, quote: str | None) -> Substitution:
        """``$(NAME[ ARG]*)``; inside a ``quote``-d text, arguments cannot be quoted."""
        self.pos += 2  # "$("
        start = self.pos
        while not self.at_end() and (self.peek().isalnum() or self.peek() in "_-"):
            self.pos += 1
        name = self.text[start : self.pos]
        if not name or not name[0].isalpha():
            raise self.error("expected a substitution name after '$('")
        args: list[tuple[Part, ...]] = []
        while True:
            if self.at_end():
                raise self.error(f"unterminated $({name} ...")
            if self.peek() == ")":
                self.pos += 1
                return Substitution(name, tuple(args))
            if self.peek() != " ":
                raise self.error(f"expected one space or ')' in $({name} ...)")
            self.pos += 1
            args.append(self.argument(quote))

    def argument(self, quote: str | None) -> tuple[Part, ...]:
        if quote is None and self.peek() in ("'", '"'):
            return self.quoted(self.peek())
        parts: list[Part] = []
        buffer: list[str] = []
        stop = _UNQUOTED_STOP if quote is None else f" {quote}()\\"
        while not self.at_end():
            char = self.peek()
            if self.peek(2) == "$(":
                _flush(buffer, parts)
                parts.append(self.substitution(quote))
            elif char == "\\" and self.peek(2) != "\\ ":
                self.take_character(buffer)
            elif char == "\\":  # a backslash before a space is itself; the space still separates
                buffer.append(char)
                self.pos += 1
            elif char in stop:
                break
            else:
                buffer.append(char)
                self.pos += 1
        _flush(buffer, parts)
        if not parts:
            what = "a space, quote or parenthesis must be escaped" if not self.at_end() else "missing argument"
            raise self.error(f"empty or malformed argument ({what})")
        return tuple(parts)

    def quoted(self, quote: str) -> tuple[Part, ...]:
        """A whole ``'...'``/``"..."`` argument: kept spaces, substitutions, escapes."""
        self.pos += 1
        parts: list[Part] = []
        buffer: list[str] = []
        while not self.at_end() and self.peek() != quote:
            if self.peek(2) == "$(":
                _flush(buffer, parts)
                parts.append(self.substitution(quote))
            else:
                self.take_character(buffer)
        if self.at_end():
            raise self.error(f"unterminated {quote}-quoted argument")
        self.pos += 1
        _flush(buffer, parts)
        if not self.at_end() and self.peek() not in " )":
            raise self.error(f"text right after a {quote}-quoted argument")
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
    low, high = _ARITY[substitution.name]
    count = len(substitution.args)
    if not low <= count <= high:
        expected = str(low) if low == high else f"{low} to {high}"
        raise LaunchError(f"$({substitution.name} ...) takes {expected} argument(s), got {count}")
    return handler(context, [_Argument(arg, context) for arg in substitution.args])


class _Argument:
    """One argument, evaluated on demand; ``empty_list`` for ``''``/``""`` (see the module doc)."""

    def __init__(self, parts: tuple[Part, ...], context: SubstitutionContext):
        self.parts = parts
        self.context = context

    @property
    def empty_list(self) -> bool:
        return not self.parts

    @property
    def text(self) -> str:
        return evaluate(self.parts, self.context)

    def compared_text(self) -> str:
        """What ``equals``/``not-equals`` compare: ``str([])`` for an empty list."""
        return "[]" if self.empty_list else self.text

    def boolean(self, what: str) -> bool:
        """ros2/launch's typed bool: '1'/'0', else a YAML boolean; anything else is an error."""
        if self.empty_list:
            raise LaunchError(f"$({what} ...): an empty quoted argument is not a boolean")
        value = self.text
        loaded = {"1": True, "0": False}.get(value)
        if loaded is None:
            try:
                loaded = yaml.safe_load(value) if value else None
            except yaml.YAMLError:
                loaded = None
        if not isinstance(loaded, bool):
            raise LaunchError(f"$({what} ...): '{value}' is not a boolean (true/false/1/0)")
        return loaded


def _var(context: SubstitutionContext, args: list[_Argument]) -> str:
    name = args[0].text
    if name in context.configurations:
        return context.configurations[name]
    if len(args) == 2:
        return args[1].text
    raise LaunchError(f"unknown launch argument '{name}' in $(var {name}) (declare it with 'arg' or 'let')")


def _env(context: SubstitutionContext, args: list[_Argument]) -> str:
    name = args[0].text
    if name in context.environ:
        return context.environ[name]
    if len(args) == 2:
        return args[1].text
    raise LaunchError(f"environment variable '{name}' is not set in $(env {name}) (give a default: $(env {name} VALUE))")


def _anon(context: SubstitutionContext, args: list[_Argument]) -> str:
    """``<name>_<host>_<pid>_<random>`` with '.', '-', ':' made '_'; one value per name per launch."""
    name = args[0].text
    key = "anon" + name
    if key not in context.configurations:
        value = f"{name}_{socket.gethostname()}_{os.getpid()}_{random.randint(0, sys.maxsize)}"
        context.configurations[key] = value.replace(".", "_").replace("-", "_").replace(":", "_")
    return context.configurations[key]


def _equals(context: SubstitutionContext, args: list[_Argument]) -> str:
    left, right = args[0].compared_text(), args[1].compared_text()
    words = ("true", "false", "1", "0")
    if left.lower() in words and right.lower() in words:
        same = (left.lower() in ("true", "1")) == (right.lower() in ("true", "1"))
    elif _is_float(left) and _is_float(right):
        same = math.isclose(float(left), float(right))
    else:
        same = left == right
    return "true" if same else "false"


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _flip(result: str) -> str:
    return "false" if result == "true" else "true"


_HANDLERS: dict[str, Callable[[SubstitutionContext, list[_Argument]], str]] = {
    "var": _var,
    "env": _env,
    "find-pkg-share": lambda context, args: str(context.find_package_share(args[0].text)),
    "find-pkg-prefix": lambda context, args: str(context.find_package_prefix(args[0].text)),
    "dirname": lambda context, args: str(context.current_file.parent),
    "filename": lambda context, args: str(context.current_file),
    "anon": _anon,
    "not": lambda context, args: "false" if args[0].boolean("not") else "true",
    "and": lambda context, args: "true" if args[0].boolean("and") & args[1].boolean("and") else "false",
    "or": lambda context, args: "true" if args[0].boolean("or") | args[1].boolean("or") else "false",
    "equals": _equals,
    "not-equals": lambda context, args: _flip(_equals(context, args)),
}

_ARITY: dict[str, tuple[int, int]] = {
    "var": (1, 2),
    "env": (1, 2),
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
