"""JSON schema -> GBNF grammar for llama.cpp, honouring numeric bounds in [0, 1].

llama.cpp's own converter ignores ``minimum``/``maximum`` on numbers, so a schema that asks
for a confidence in [0, 1] would still let the model write ``85``. This small converter
covers the subset structured replies use — objects (every listed property, in order),
strings with ``enum``/``const``, numbers and integers (bounded to [0, 1] when the schema
says so), booleans, null, arrays and ``enum`` of any JSON values — and raises
:class:`UnsupportedSchema` for anything else, so the caller can fall back to llama.cpp's
converter.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["UnsupportedSchema", "schema_to_gbnf"]

_SPACE = 'space ::= " "?'
_STRING = r'string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" ["\\/bfnrt] )* "\"" space'
_NUMBER = 'number ::= "-"? ([0-9] | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,4})? space'
_INTEGER = 'integer ::= "-"? ([0-9] | [1-9] [0-9]{0,15}) space'
_UNIT = 'unit ::= ("0" ("." [0-9]{1,4})? | "1" ("." "0"{1,4})?) space'
_NAME_RE = re.compile(r"[^a-zA-Z0-9]+")


class UnsupportedSchema(ValueError):
    """The schema uses a feature this converter does not cover."""


def _literal(value: Any) -> str:
    """A GBNF literal matching ``value`` serialised as compact JSON."""
    return json.dumps(json.dumps(value, ensure_ascii=False), ensure_ascii=False)


class _Builder:
    def __init__(self) -> None:
        self.rules: dict[str, str] = {}
        self.shared(_SPACE)

    def rule(self, hint: str, body: str) -> str:
        base = _NAME_RE.sub("-", hint).strip("-").lower() or "r"
        name, n = base, 1
        while name in self.rules and self.rules[name] != body:
            n += 1
            name = f"{base}-{n}"
        self.rules[name] = body
        return name

    def shared(self, line: str) -> str:
        name = line.split(" ::= ", 1)[0]
        self.rules[name] = line.split(" ::= ", 1)[1]
        return name

    def visit(self, schema: Mapping[str, Any], hint: str) -> str:
        if not isinstance(schema, Mapping):
            raise UnsupportedSchema(f"schema at {hint!r} is not an object")
        if "const" in schema:
            return self.rule(hint, f"{_literal(schema['const'])} space")
        if "enum" in schema:
            values = list(schema["enum"])
            if not values:
                raise UnsupportedSchema(f"empty enum at {hint!r}")
            return self.rule(hint, "(" + " | ".join(_literal(v) for v in values) + ") space")
        kind = schema.get("type")
        if kind == "object":
            return self.visit_object(schema, hint)
        if kind == "array":
            item = self.visit(schema.get("items", {"type": "string"}), f"{hint}-item")
            return self.rule(hint, f'"[" space ({item} ("," space {item})*)? "]" space')
        if kind == "string":
            if set(schema) - {"type", "description", "title"}:
                raise UnsupportedSchema(f"string constraints at {hint!r}")
            return self.shared(_STRING)
        if kind in ("number", "integer"):
            low, high = schema.get("minimum"), schema.get("maximum")
            if low is None and high is None:
                return self.shared(_INTEGER if kind == "integer" else _NUMBER)
            if kind == "number" and low == 0 and high == 1:
                return self.shared(_UNIT)
            raise UnsupportedSchema(f"numeric bounds other than [0, 1] at {hint!r}")
        if kind == "boolean":
            return self.rule("boolean", '("true" | "false") space')
        if kind == "null":
            return self.rule("null", '"null" space')
        raise UnsupportedSchema(f"type {kind!r} at {hint!r}")

    def visit_object(self, schema: Mapping[str, Any], hint: str) -> str:
        properties = schema.get("properties", {})
        if not isinstance(properties, Mapping) or not properties:
            raise UnsupportedSchema(f"object without properties at {hint!r}")
        required = schema.get("required", list(properties))
        if set(required) != set(properties):
            raise UnsupportedSchema(f"optional properties at {hint!r}")
        pairs = []
        for key, sub in properties.items():
            value = self.visit(sub, f"{hint}-{key}" if hint != "top" else str(key))
            pairs.append(f'{_literal(key)} space ":" space {value}')
        body = '"{" space ' + ' "," space '.join(pairs) + ' "}" space'
        return self.rule(hint, body)


def schema_to_gbnf(schema: Mapping[str, Any]) -> str:
    """A GBNF grammar whose ``root`` matches compact JSON valid under ``schema``.

    Raises:
        UnsupportedSchema: the schema uses a feature outside the covered subset.
    """
    builder = _Builder()
    builder.rules["root"] = ""  # reserved: a property named "root" gets another rule name
    builder.rules["root"] = builder.visit(schema, "top")
    return "\n".join(f"{name} ::= {body}" for name, body in builder.rules.items()) + "\n"
