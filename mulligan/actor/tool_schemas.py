"""Whether a tool's arguments schema, given by another program (an MCP server), is one."""

from __future__ import annotations

from typing import Any

FIX_SCHEMA = (
    "; fix the tool's inputSchema in the server (a JSON schema of type object, each property"
    " a schema, 'required' naming properties), or leave the server out"
)


def schema_fault(schema: Any) -> str:
    """What keeps `schema` from being a JSON schema of a tool's arguments ("" when nothing)."""
    if not isinstance(schema, dict):
        return f"is a {type(schema).__name__}, not an object"
    if schema.get("type", "object") != "object":
        return f"has type {schema['type']!r}, not 'object'"
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        return f"has 'properties' as a {type(properties).__name__}, not an object"
    for name, spec in properties.items():
        if not isinstance(spec, dict | bool):
            return f"has property {name!r} as {spec!r}, not a schema (an object, or true/false)"
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(n, str) for n in required):
        return f"has 'required' as {required!r}, not a list of property names"
    missing = [n for n in required if n not in properties]
    return f"requires {missing[0]!r}, which is not among its properties" if missing else ""
