"""Triton's ``config.pbtxt`` (protobuf text format) read into the JSON shape Triton hands a model.

Triton gives a Python-backend model its configuration as ``args["model_config"]``: the
``ModelConfig`` message as JSON, field names as written, ``parameters`` as a map from key to
``{"string_value": ...}``. :func:`read_model_config` builds the same shape from the text without
Triton's schema (this module runs where ``tritonclient`` is not installed, inside MLServer), so
it needs to know which fields are repeated even when they appear once: :data:`REPEATED` lists
those of ``model_config.proto`` a model may read. Numbers come back as ``int`` or ``float``
(Triton's JSON writes 64-bit integers as strings; ``int()`` reads either). Enum values
(``KIND_CPU``, ``TYPE_FP32``) come back as their names, as in Triton's JSON.

The grammar is the text format's: ``name: value``, ``name { ... }`` or ``name: { ... }``,
``name [ a, b ]`` lists (of values or messages), a field written again appends, ``#`` comments,
single- or double-quoted strings with C escapes. Anything else raises :class:`PbtxtError` with
the line it is on.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from modelhost.errors import ModelHostError

__all__ = ["REPEATED", "PbtxtError", "parse_pbtxt", "read_model_config"]

REPEATED = frozenset(
    {
        "input",
        "output",
        "batch_input",
        "batch_output",
        "instance_group",
        "dims",
        "gpus",
        "versions",
        "preferred_batch_size",
        "model_warmup",
        "parameters",
        "label_filename_list",
        "secondary_devices",
        "host_policy",
    }
)
"""Fields of ``model_config.proto`` that are repeated (lists) even when written once."""

_MAPS = frozenset({"parameters"})
"""Map fields: written as repeated ``{ key: ... value: ... }`` entries, read as a dict."""

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<number>[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?[fF]?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<punct>[{}\[\]:,;<>])
    """,
    re.VERBOSE,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "\\": "\\"}


class PbtxtError(ModelHostError, ValueError):
    """The text is not protobuf text format as this reader knows it."""


def _tokens(text: str) -> Iterator[tuple[str, str, int]]:
    position, line = 0, 1
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise PbtxtError(f"line {line}: cannot read {text[position : position + 20]!r}")
        kind = match.lastgroup or ""
        value = match.group()
        if kind != "space":
            yield kind, value, line
        line += value.count("\n")
        position = match.end()


def _unquote(token: str, line: int) -> str:
    body = token[1:-1]
    out: list[str] = []
    index = 0
    while index < len(body):
        char = body[index]
        if char != "\\":
            out.append(char)
            index += 1
            continue
        escape = body[index + 1]
        if escape in _ESCAPES:
            out.append(_ESCAPES[escape])
            index += 2
        elif escape.isdigit():  # octal, as protobuf writes non-printable bytes
            digits = re.match(r"[0-7]{1,3}", body[index + 1 :])
            assert digits is not None
            out.append(chr(int(digits.group(), 8)))
            index += 1 + len(digits.group())
        else:
            raise PbtxtError(f"line {line}: unknown escape \\{escape}")
    return "".join(out)


def _number(token: str) -> int | float:
    bare = token.rstrip("fF")
    if re.fullmatch(r"[-+]?\d+", bare):
        return int(bare)
    return float(bare)


class _Reader:
    def __init__(self, text: str) -> None:
        self._tokens = list(_tokens(text))
        self._at = 0

    def _peek(self) -> tuple[str, str, int] | None:
        return self._tokens[self._at] if self._at < len(self._tokens) else None

    def _next(self, what: str) -> tuple[str, str, int]:
        token = self._peek()
        if token is None:
            raise PbtxtError(f"unexpected end of text, expected {what}")
        self._at += 1
        return token

    def _expect(self, punct: str) -> None:
        kind, value, line = self._next(repr(punct))
        if kind != "punct" or value != punct:
            raise PbtxtError(f"line {line}: expected {punct!r}, got {value!r}")

    def message(self, closing: str | None) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        while True:
            token = self._peek()
            if token is None:
                if closing is None:
                    return fields
                raise PbtxtError(f"unexpected end of text, expected {closing!r}")
            kind, value, line = token
            if kind == "punct" and value == closing:
                self._at += 1
                return fields
            if kind == "punct" and value in ",;":
                self._at += 1
                continue
            if kind != "name":
                raise PbtxtError(f"line {line}: expected a field name, got {value!r}")
            self._at += 1
            self._field(fields, value)

    def _field(self, fields: dict[str, Any], name: str) -> None:
        token = self._peek()
        if token is not None and token[0] == "punct" and token[1] == ":":
            self._at += 1
            token = self._peek()
        if token is None:
            raise PbtxtError(f"field {name!r} has no value")
        kind, value, _ = token
        if kind == "punct" and value == "[":
            self._at += 1
            items = self._list()
            existing = fields.get(name, [])
            fields[name] = [*(existing if isinstance(existing, list) else [existing]), *items]
            return
        item = self._value()
        if name not in fields:
            fields[name] = [item] if name in REPEATED else item
            return
        if not isinstance(fields[name], list):  # a field written twice is repeated
            fields[name] = [fields[name]]
        fields[name].append(item)

    def _list(self) -> list[Any]:
        items: list[Any] = []
        while True:
            token = self._peek()
            if token is None:
                raise PbtxtError("unexpected end of text in a list")
            if token[0] == "punct" and token[1] == "]":
                self._at += 1
                return items
            if token[0] == "punct" and token[1] == ",":
                self._at += 1
                continue
            items.append(self._value())

    def _value(self) -> Any:
        kind, value, line = self._next("a value")
        if kind == "punct" and value in "{<":
            return self.message("}" if value == "{" else ">")
        if kind == "string":
            text = _unquote(value, line)
            # Adjacent strings concatenate, as in C.
            while (following := self._peek()) is not None and following[0] == "string":
                self._at += 1
                text += _unquote(following[1], following[2])
            return text
        if kind == "number":
            return _number(value)
        if kind == "name":
            return {"true": True, "false": False}.get(value, value)
        raise PbtxtError(f"line {line}: unexpected {value!r}")


def _maps(message: Any) -> Any:
    """``parameters`` entries (``{key, value}``) as a dict, at every depth."""
    if isinstance(message, list):
        return [_maps(item) for item in message]
    if not isinstance(message, dict):
        return message
    out: dict[str, Any] = {}
    for name, value in message.items():
        if name in _MAPS and isinstance(value, list):
            entries: dict[str, Any] = {}
            for entry in value:
                if not isinstance(entry, dict) or "key" not in entry:
                    raise PbtxtError(f"{name}: an entry without a key: {entry!r}")
                entries[str(entry["key"])] = _maps(entry.get("value", {}))
            out[name] = entries
        else:
            out[name] = _maps(value)
    return out


def parse_pbtxt(text: str) -> dict[str, Any]:
    """The message written in ``text`` as nested dicts and lists (see the module docstring)."""
    return _maps(_Reader(text).message(None))  # type: ignore[no-any-return]


def read_model_config(path: Path) -> dict[str, Any]:
    """A model folder's ``config.pbtxt`` (or a file of its ``configs/``) as Triton's JSON shape;
    ``name`` defaults to the folder's name, as Triton's does."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PbtxtError(f"cannot read {path}: {exc}") from exc
    try:
        config = parse_pbtxt(text)
    except PbtxtError as exc:
        raise PbtxtError(f"{path}: {exc}") from exc
    folder = path.parent.parent if path.parent.name == "configs" else path.parent
    config.setdefault("name", folder.name)
    return config
