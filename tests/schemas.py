"""Offline validation of generated Kubernetes objects, for tests.

* :func:`builtin_errors` checks a built-in object (Pod, Service, ...) against the
  strict JSON schemas that the ``kubernetes-validate`` package ships.
* :class:`CRDValidator` checks a custom resource against a CustomResourceDefinition
  the way the API server does on create: structural defaulting, OpenAPI schema
  validation, ``x-kubernetes-list-type`` invariants and ``x-kubernetes-validations``
  CEL rules (evaluated with ``cel-expr-python`` plus a Python port of the Kubernetes
  CEL libraries that matter for CRDs).

Deliberate differences from the API server: unknown fields and ``null`` in fields
that are not ``nullable`` are reported (the server silently prunes them; in a
generated object both are bugs), and an integer field holding a float such as
``1.0`` is a type error. Errors are ``"<path>: <message>"`` strings, sorted, with
paths written like ``spec.tasks[0].name`` (``<root>`` for the object itself).
"""

from __future__ import annotations

import copy
import functools
import json
import math
import re
from collections.abc import Callable, Iterator
from datetime import datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from cel_expr_python import cel
from cel_expr_python.ext import ext_optional, ext_strings
from referencing import Registry, Resource

KUBERNETES_VERSION = "1.32"
REFERENCE_CRDS = Path(__file__).resolve().parents[1].parent / "shared" / "reference-crds"

_SCHEMA_DIR = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
_OBJECT_META = "https://kubernetes.io/api/_definitions.json#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


def reference_crd_path(*parts: str) -> Path:
    """Path of a file under ``../shared/reference-crds``; skips the calling test if absent."""
    path = REFERENCE_CRDS.joinpath(*parts)
    if not path.is_file():
        pytest.skip(f"reference CRD not available: {path}")
    return path


# --- JSON Schema machinery shared by built-in and custom resources -----------------


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        return f"{path}.{key}" if path else key
    return f"{path}[{key}]"


def _at(path: str, message: str) -> str:
    return f"{path or '<root>'}: {message}"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _list_type(validator: Any, list_type: str, instance: Any, schema: dict) -> Iterator[jsonschema.ValidationError]:
    """``x-kubernetes-list-type``: items of a ``set``, keys of a ``map`` must be unique."""
    if not isinstance(instance, list) or list_type not in ("set", "map"):
        return
    keys = schema.get("x-kubernetes-list-map-keys", [])
    seen: set[str] = set()
    for index, item in enumerate(instance):
        if list_type == "map" and isinstance(item, dict):
            item = {key: item.get(key) for key in keys}
        key = _canonical(item)
        if key in seen:
            yield jsonschema.ValidationError(f"Duplicate value: {key}", path=[index])
        seen.add(key)


def _is_date_time(value: Any) -> bool:
    if not isinstance(value, str):
        return True
    if not re.fullmatch(r"\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)", value):
        return False
    try:
        datetime.strptime(value[:19].upper(), "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return False
    return True


def _int_within(bits: int) -> Callable[[Any], bool]:
    limit = 2 ** (bits - 1)
    return lambda value: not isinstance(value, int) or -limit <= value < limit


_FORMATS = jsonschema.FormatChecker(())
_FORMATS.checks("int32")(_int_within(32))
_FORMATS.checks("int64")(_int_within(64))
_FORMATS.checks("date-time")(_is_date_time)

_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    validators={"x-kubernetes-list-type": _list_type},
    # JSON Schema accepts 1.0 as an integer; a generated manifest must not contain it.
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool)
    ),
)


def _schema_errors(validator: Any, instance: Any) -> Iterator[tuple[str, str]]:
    """(failed keyword, formatted message) for every error; unknown fields one by one."""
    for error in validator.iter_errors(instance):
        path = ""
        for key in error.absolute_path:
            path = _join(path, key)
        if error.validator == "additionalProperties" and error.validator_value is False:
            for key in sorted(set(error.instance) - set(error.schema.get("properties", {}))):
                yield "additionalProperties", _at(_join(path, key), "unknown field")
        else:
            yield str(error.validator), _at(path, error.message)


@functools.cache
def _schemas(version: str) -> tuple[Path, Registry]:
    """The strict schema directory of a Kubernetes minor version and a registry of its definitions."""
    match = re.fullmatch(r"v?(\d+\.\d+)(\.\d+)?", version)
    directory = _SCHEMA_DIR / f"v{match[1] if match else version}.0-local-strict"
    if not directory.is_dir():
        available = sorted(path.name for path in _SCHEMA_DIR.glob("*-local-strict"))
        raise ValueError(f"no kubernetes-validate schemas for Kubernetes {version!r}; available: {available}")
    definitions = json.loads((directory / "_definitions.json").read_text())
    return directory, Registry().with_resource(definitions["$id"], Resource.from_contents(definitions))


@functools.cache
def _builtin_validator(kind: str, api_version: str, version: str) -> Any:
    directory, registry = _schemas(version)
    # rbac.authorization.k8s.io/v1 -> rbac-v1, apps/v1 -> apps-v1, v1 -> v1 (as kubernetes-validate does)
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    path = directory / f"{kind.lower()}-{group_version}.json"
    if not kind or not path.is_file():
        raise LookupError(f"no schema for kind {kind!r} apiVersion {api_version!r} in Kubernetes {version}")
    return _Validator(json.loads(path.read_text()), registry=registry, format_checker=_FORMATS)


def builtin_errors(obj: dict, version: str = KUBERNETES_VERSION) -> list[str]:
    """Schema errors of a built-in Kubernetes object, [] if valid; LookupError for an unknown kind."""
    validator = _builtin_validator(obj.get("kind", ""), obj.get("apiVersion", ""), version)
    return sorted(message for _, message in _schema_errors(validator, obj))


# --- Kubernetes CEL libraries ----------------------------------------------------------


def _cel_equal(a: Any, b: Any) -> bool:
    """CEL equality: no bool/int confusion, numbers compare across int and double."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_cel_equal, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_cel_equal(value, b[key]) for key, value in a.items())
    return type(a) is type(b) and a == b


def _index_of(items: list, value: Any) -> int:
    return next((i for i, item in enumerate(items) if _cel_equal(item, value)), -1)


def _last_index_of(items: list, value: Any) -> int:
    return next((i for i in reversed(range(len(items))) if _cel_equal(items[i], value)), -1)


def _sum(items: list) -> int | float:
    if any(isinstance(item, bool) or not isinstance(item, (int, float)) for item in items):
        raise TypeError("sum() needs a list of numbers")
    return sum(items)


def _extreme(choose: Callable[[list], Any], name: str) -> Callable[[list], Any]:
    def extreme(items: list) -> Any:
        if not items:
            raise ValueError(f"{name} called on empty list")
        return choose(items)

    return extreme


def _contains_all(a: list, b: list) -> bool:
    return all(any(_cel_equal(x, y) for x in a) for y in b)


def _find(text: str, pattern: str) -> str:
    match = re.search(pattern, text)
    return match.group() if match else ""


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    """Go's FindAllString: an empty match right after the previous match is skipped."""
    found: list[str] = []
    previous_end = -1
    for match in re.finditer(pattern, text):
        if match.start() == match.end() == previous_end:
            continue
        found.append(match.group())
        previous_end = match.end()
    return found if limit < 0 else found[:limit]


_BINARY_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY = re.compile(r"([+-]?)(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d{1,4})?")


def parse_quantity(text: str) -> Fraction:
    """Exact value of a Kubernetes resource.Quantity string ("1.5Gi", "200m", "1e3", ...).

    Like resource.ParseQuantity, the value is rounded away from zero to a multiple of
    1n and binary-suffixed values are capped at 2**63-1.
    """
    match = _QUANTITY.fullmatch(text)
    if not match:
        raise ValueError(f"{text!r} is not a valid quantity")
    sign, number, suffix = match.groups()
    suffix = suffix or ""
    if suffix in _BINARY_SUFFIXES:
        value = min(Fraction(number) * _BINARY_SUFFIXES[suffix], Fraction(2**63 - 1))
    else:
        exponent = _DECIMAL_SUFFIXES[suffix] if suffix in _DECIMAL_SUFFIXES else int(suffix[1:])
        value = Fraction(number) * Fraction(10) ** exponent
    value = Fraction(math.ceil(value * 10**9), 10**9)
    return -value if sign == "-" else value


# A Quantity is passed through CEL as a one-entry map: the binding cannot carry opaque
# Python objects, and map<string, string> keeps its overloads apart from int and string.
_QUANTITY_KEY = "kubernetes.Quantity"


def _to_quantity(value: Fraction) -> dict[str, str]:
    return {_QUANTITY_KEY: str(value)}


def _from_quantity(value: dict) -> Fraction:
    if set(value) != {_QUANTITY_KEY}:
        raise TypeError("not a quantity")
    return Fraction(value[_QUANTITY_KEY])


def _is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except ValueError:
        return False
    return True


def _as_integer(q: dict) -> int:
    value = _from_quantity(q)
    if value.denominator != 1 or not -(2**63) <= value < 2**63:
        raise ValueError("cannot convert value to integer")
    return int(value)


def _is_integer(q: dict) -> bool:
    try:
        _as_integer(q)
    except ValueError:
        return False
    return True


def _sign(q: dict) -> int:
    return _compare(q, _to_quantity(Fraction(0)))


def _as_float(q: dict) -> float:
    value = _from_quantity(q)
    try:
        return float(value)
    except OverflowError:
        return math.copysign(math.inf, value)


def _compare(a: dict, b: dict) -> int:
    x, y = _from_quantity(a), _from_quantity(b)
    return (x > y) - (x < y)


def _quantity_op(op: Callable[[Fraction, Fraction], Fraction]) -> Callable[[dict, Any], dict]:
    def apply(q: dict, other: Any) -> dict:
        operand = Fraction(other) if isinstance(other, int) else _from_quantity(other)
        return _to_quantity(op(_from_quantity(q), operand))

    return apply


def _kubernetes_library() -> cel.CelExtension:
    t = cel.Type
    dyn, string, integer, boolean = t.DYN, t.STRING, t.INT, t.BOOL
    items, quantity = t.List(t.DYN), t.Map(t.STRING, t.STRING)
    # (function, overload id, is member, parameter types, result type, implementation)
    overloads: list[tuple[str, str, bool, list, Any, Callable]] = [
        ("sum", "list_sum", True, [items], dyn, _sum),
        ("min", "list_min", True, [items], dyn, _extreme(min, "min")),
        ("max", "list_max", True, [items], dyn, _extreme(max, "max")),
        ("isSorted", "list_is_sorted", True, [items], boolean, lambda xs: all(a <= b for a, b in zip(xs, xs[1:]))),
        ("indexOf", "list_index_of", True, [items, dyn], integer, _index_of),
        ("lastIndexOf", "list_last_index_of", True, [items, dyn], integer, _last_index_of),
        ("find", "string_find", True, [string, string], string, _find),
        ("findAll", "string_find_all", True, [string, string], t.List(string), _find_all),
        ("findAll", "string_find_all_n", True, [string, string, integer], t.List(string), _find_all),
        ("sets.contains", "sets_contains", False, [items, items], boolean, _contains_all),
        ("sets.equivalent", "sets_equivalent", False, [items, items], boolean,
         lambda a, b: _contains_all(a, b) and _contains_all(b, a)),
        ("sets.intersects", "sets_intersects", False, [items, items], boolean,
         lambda a, b: any(_cel_equal(x, y) for x in a for y in b)),
        ("isQuantity", "is_quantity_string", False, [string], boolean, _is_quantity),
        ("quantity", "string_to_quantity", False, [string], quantity, lambda s: _to_quantity(parse_quantity(s))),
        ("sign", "quantity_sign", False, [quantity], integer, _sign),
        ("sign", "quantity_sign_member", True, [quantity], integer, _sign),
        ("isInteger", "quantity_is_integer", True, [quantity], boolean, _is_integer),
        ("asInteger", "quantity_get_int", True, [quantity], integer, _as_integer),
        ("asApproximateFloat", "quantity_get_float", True, [quantity], t.DOUBLE, _as_float),
        ("add", "quantity_add", True, [quantity, quantity], quantity, _quantity_op(lambda a, b: a + b)),
        ("add", "quantity_add_int", True, [quantity, integer], quantity, _quantity_op(lambda a, b: a + b)),
        ("sub", "quantity_sub", True, [quantity, quantity], quantity, _quantity_op(lambda a, b: a - b)),
        ("sub", "quantity_sub_int", True, [quantity, integer], quantity, _quantity_op(lambda a, b: a - b)),
        ("compareTo", "quantity_compare_to", True, [quantity, quantity], integer, _compare),
        ("isLessThan", "quantity_is_less_than", True, [quantity, quantity], boolean, lambda a, b: _compare(a, b) < 0),
        ("isGreaterThan", "quantity_is_greater_than", True, [quantity, quantity], boolean,
         lambda a, b: _compare(a, b) > 0),
    ]
    grouped: dict[str, list[cel.Overload]] = {}
    for name, overload_id, member, parameters, result, impl in overloads:
        grouped.setdefault(name, []).append(
            cel.Overload(overload_id, result, parameters, is_member=member, impl=impl)
        )
    return cel.CelExtension("kubernetes", [cel.FunctionDecl(name, group) for name, group in grouped.items()])


@functools.cache
def _cel_env() -> cel.Env:
    # Order matters: an extension declared after ext_strings may add overloads to its
    # functions (list indexOf next to string indexOf); declared before, it clashes.
    # Custom functions must come as a CelExtension: passed as NewEnv(functions=...),
    # overloads with dyn parameters never match at run time.
    return cel.NewEnv(
        variables={"self": cel.Type.DYN},
        extensions=[ext_strings.ExtStrings(2), ext_optional.ExtOptional(), _kubernetes_library()],
    )


class CelError(Exception):
    """A CEL expression that does not compile or fails to evaluate."""


# --- values as CEL sees them -------------------------------------------------------------

_CEL_RESERVED = frozenset(
    "true false null in as break const continue else for function if import let loop package "
    "namespace return var void while".split()
)
_ESCAPES = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}


def _escape(name: str) -> str | None:
    """A property name as CEL sees it (``x-y`` is ``x__dash__y``); None if not accessible."""
    if not name or name[0] in "0123456789":
        return None
    if name in _CEL_RESERVED:
        return f"__{name}__"
    parts = re.split(r"(__|[-./]|[^a-zA-Z0-9_])", name)
    if any(part not in _ESCAPES for part in parts[1::2]):
        return None
    return "".join(_ESCAPES.get(part, part) for part in parts)


def _to_cel(value: Any, node: dict, resource: bool = False) -> Any:
    """``value`` as the apiserver binds it to ``self``: only declared properties (escaped),
    numbers as doubles, and metadata of a resource limited to name and generateName."""
    resource = resource or bool(node.get("x-kubernetes-embedded-resource"))
    if isinstance(value, dict):
        properties = node.get("properties", {})
        additional = node.get("additionalProperties")
        if isinstance(additional, dict) and not properties:
            return {key: _to_cel(child, additional) for key, child in value.items()}
        result = {}
        for key, child in value.items():
            if resource and key == "metadata" and isinstance(child, dict):
                result[key] = {k: v for k, v in child.items() if k in ("name", "generateName")}
            elif resource and key in ("apiVersion", "kind"):
                result[key] = child
            elif key in properties and (name := _escape(key)):
                result[name] = _to_cel(child, properties[key])
        return result
    if isinstance(value, list):
        return [_to_cel(item, node.get("items") or {}) for item in value]
    if node.get("type") == "number" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


# --- CRD schemas ---------------------------------------------------------------------------

_PASSTHROUGH = frozenset(
    "enum minimum maximum exclusiveMinimum exclusiveMaximum minLength maxLength pattern minItems "
    "maxItems uniqueItems minProperties maxProperties required multipleOf format "
    "x-kubernetes-list-type x-kubernetes-list-map-keys".split()
)
# Errors after which the apiserver does not run CEL rules (see hasBlockingErr in apiextensions).
_BLOCKING = frozenset({"type", "required", "enum", "maxLength", "maxItems", "maxProperties"})
_BOUNDED_FORMATS = frozenset({"date", "date-time", "duration"})


def _json_schema(node: dict, closed: bool = True) -> dict:
    """An OpenAPI v3 CRD schema node as JSON Schema 2020-12.

    ``closed`` objects reject undeclared properties; it is off inside allOf/anyOf/oneOf/not,
    whose properties only add constraints to fields declared next to them.
    """
    out: dict[str, Any] = {key: value for key, value in node.items() if key in _PASSTHROUGH}
    for bound in ("minimum", "maximum"):  # OpenAPI 3.0 boolean exclusive bounds
        exclusive = "exclusive" + bound.capitalize()
        if isinstance(out.get(exclusive), bool):
            if out.pop(exclusive) and bound in out:
                out[exclusive] = out.pop(bound)
    if isinstance(node.get("properties"), dict):
        out["properties"] = {key: _json_schema(child, closed) for key, child in node["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            out[key] = _json_schema(node[key], closed)
    if isinstance(node.get("not"), dict):
        out["not"] = _json_schema(node["not"], closed=False)
    for key in ("allOf", "anyOf", "oneOf"):
        if key in node:
            out[key] = [_json_schema(child, closed=False) for child in node[key]]

    nullable = bool(node.get("nullable"))
    types = [node["type"]] if "type" in node else []
    if node.get("x-kubernetes-int-or-string"):
        types = ["integer", "string"]
        if out.get("anyOf") == [{"type": "integer"}, {"type": "string"}]:
            del out["anyOf"]  # the usual spelling of int-or-string; "type" says it with a clearer message
    if types:
        out["type"] = types + ["null"] if nullable else (types if len(types) > 1 else types[0])
    if nullable and "enum" in out:
        out["enum"] = [*out["enum"], None]

    if node.get("x-kubernetes-embedded-resource"):
        properties = out.setdefault("properties", {})
        for key in ("apiVersion", "kind"):
            properties.setdefault(key, {"type": "string"})
        properties["metadata"] = _metadata_schema(node.get("properties", {}).get("metadata"))
        out["required"] = sorted({*out.get("required", []), "apiVersion", "kind"})
    if (
        closed
        and node.get("type") == "object"
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def _metadata_schema(node: dict | None, root: bool = False) -> dict:
    """ObjectMeta, plus what the CRD says about name and generateName."""
    extra = _json_schema({"properties": (node or {}).get("properties", {})}, closed=False)
    if root:
        name = {"type": "string", "pattern": _DNS_SUBDOMAIN, "maxLength": 253}
        extra["properties"]["name"] = {"allOf": [name, extra["properties"].get("name", {})]}
    return {"allOf": [{"$ref": _OBJECT_META}, extra]}


def _apply_defaults(value: Any, node: dict) -> None:
    """Structural defaulting in place (apiextensions' structural/defaulting.Default)."""
    if isinstance(value, dict):
        properties = node.get("properties", {})
        for key, child in properties.items():
            if "default" in child and (key not in value or (value[key] is None and not child.get("nullable"))):
                value[key] = copy.deepcopy(child["default"])
        additional = node.get("additionalProperties")
        for key, child in value.items():
            schema = properties.get(key, additional)
            if isinstance(schema, dict):
                _apply_defaults(child, schema)
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for item in value:
            _apply_defaults(item, node["items"])


def _children(node: dict) -> Iterator[tuple[str, str | None, dict]]:
    """(schema path suffix, field name, child schema) of properties, items and additionalProperties."""
    for key, child in node.get("properties", {}).items():
        yield f".properties[{key}]", key, child
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            yield f".{key}", None, node[key]


def _unbounded(node: dict) -> str | None:
    """The missing bound that makes CEL cost estimation of this node unbounded, if any."""
    kind = node.get("type")
    if kind == "array" and "maxItems" not in node:
        return "maxItems"
    if kind == "string" and not ({"maxLength", "enum"} & node.keys()) and node.get("format") not in _BOUNDED_FORMATS:
        return "maxLength"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict) and "maxProperties" not in node:
        return "maxProperties"
    return None


def _unbounded_below(
    node: dict, path: str, name: str | None = None, resource: bool = False
) -> Iterator[tuple[str, str | None, str]]:
    """(schema path, field name, missing bound) for every unbounded node strictly below ``node``.

    The metadata of a ``resource`` (the root, an embedded resource) is bounded by the apiserver.
    """
    for suffix, key, child in _children(node):
        if resource and key == "metadata":
            continue
        child_name = key if key is not None else name
        if bound := _unbounded(child):
            yield path + suffix, child_name, bound
        yield from _unbounded_below(child, path + suffix, child_name, bool(child.get("x-kubernetes-embedded-resource")))


_OLD_SELF = re.compile(r"\boldSelf\b")


class CRDValidator:
    """Validates custom resources against one version of a CustomResourceDefinition."""

    def __init__(self, crd: dict, version: str | None = None) -> None:
        """``version`` defaults to the storage version."""
        versions = crd["spec"]["versions"]
        if version is None:
            chosen = next((v for v in versions if v.get("storage")), versions[0])
        else:
            chosen = next((v for v in versions if v["name"] == version), None)
            if chosen is None:
                raise LookupError(f"CRD {crd['metadata']['name']} has no version {version!r}")
        self.kind: str = crd["spec"]["names"]["kind"]
        self.api_version: str = f"{crd['spec']['group']}/{chosen['name']}"
        self.schema: dict = chosen["schema"]["openAPIV3Schema"]
        self._programs: dict[str, Any] = {}
        self._has_rules = "x-kubernetes-validations" in json.dumps(self.schema)

        root = _json_schema(self.schema)
        properties = root.setdefault("properties", {})
        properties["apiVersion"] = {"const": self.api_version}
        properties["kind"] = {"const": self.kind}
        properties["metadata"] = _metadata_schema(self.schema.get("properties", {}).get("metadata"), root=True)
        root["required"] = sorted({*root.get("required", []), "apiVersion", "kind", "metadata"})
        self._validator = _Validator(root, registry=_schemas(KUBERNETES_VERSION)[1], format_checker=_FORMATS)

    @classmethod
    def from_file(cls, path: str | Path, version: str | None = None) -> CRDValidator:
        """Validator for a CRD YAML file, loaded (with libyaml) once per path and version."""
        return _crd_validator(Path(path).resolve(), version)

    def defaulted(self, obj: dict) -> dict:
        """A deep copy of ``obj`` with the schema defaults applied, as the apiserver does first."""
        result = copy.deepcopy(obj)
        _apply_defaults(result, self.schema)
        return result

    def errors(self, obj: dict) -> list[str]:
        """Everything the apiserver would reject ``obj`` for on create (plus unknown fields), sorted."""
        obj = self.defaulted(obj)
        found, blocking = [], False
        for keyword, message in _schema_errors(self._validator, obj):
            found.append(message)
            blocking = blocking or keyword in _BLOCKING
        metadata = obj.get("metadata")
        if isinstance(metadata, dict) and not metadata.get("name") and not metadata.get("generateName"):
            found.append(_at("metadata.name", "name or generateName is required"))
        if blocking and self._has_rules:
            found.append(_at("", "some validation rules were not checked because the object was invalid"))
        elif not blocking:
            found.extend(self._rule_errors(obj, self.schema, "", resource=True))
        return sorted(found)

    def evaluate(self, expression: str, value: Any) -> Any:
        """Evaluate a CEL expression with ``self`` bound to ``value``; raises CelError."""
        program = self._programs.get(expression)
        if program is None:
            try:
                program = _cel_env().compile(expression)
            except RuntimeError as exc:
                program = f"compile error: {str(exc).splitlines()[0]}"
            self._programs[expression] = program
        if isinstance(program, str):
            raise CelError(program)
        try:
            result = program.eval(data={"self": value})
        except RuntimeError as exc:
            raise CelError(f"evaluation error: {exc}") from None
        if result.type() == cel.Type.ERROR:
            raise CelError(f"evaluation error: {result.value()}")
        return result.plain_value()

    def _rule_errors(self, value: Any, node: dict, path: str, resource: bool = False) -> Iterator[str]:
        """Evaluate x-kubernetes-validations at every node of ``value`` that the schema declares."""
        if value is None:
            return
        rules = node.get("x-kubernetes-validations", [])
        if rules:
            self_value = _to_cel(value, node, resource)
            for rule in rules:
                if message := self._rule_error(rule, self_value):
                    yield _at(_field_path(path, rule.get("fieldPath", "")), message)
        if isinstance(value, dict):
            properties, additional = node.get("properties", {}), node.get("additionalProperties")
            for key, child in value.items():
                schema = properties.get(key, additional)
                if isinstance(schema, dict):
                    yield from self._rule_errors(child, schema, _join(path, key))
        elif isinstance(value, list) and isinstance(node.get("items"), dict):
            for index, item in enumerate(value):
                yield from self._rule_errors(item, node["items"], _join(path, index))

    def _rule_error(self, rule: dict, self_value: Any) -> str | None:
        expression = rule["rule"]
        if _OLD_SELF.search(expression):
            if not rule.get("optionalOldSelf"):
                return None  # a transition rule: the apiserver skips it on create
            expression = f"[optional.none()].all(oldSelf, {expression})"
        try:
            result = self.evaluate(expression, self_value)
        except CelError as exc:
            return f"rule {rule['rule']!r}: {exc}"
        if result is True:
            return None
        if result is not False:
            return f"rule {rule['rule']!r} returned {result!r}, not a bool"
        message = rule.get("message") or f"failed rule: {rule['rule']}"
        if "messageExpression" in rule:
            try:
                text = self.evaluate(rule["messageExpression"], self_value)
            except CelError as exc:
                return f"{message} (messageExpression: {exc})"
            if isinstance(text, str) and text.strip():
                return text
        return message

    def structural_problems(self) -> list[str]:
        """Reasons the apiserver would reject this schema (or its CEL rules), sorted."""
        problems = list(self._structural(self.schema, "openAPIV3Schema", root=True))
        metadata = self.schema.get("properties", {}).get("metadata")
        if metadata is not None and (
            set(metadata) - {"type", "properties"}
            or metadata.get("type", "object") != "object"
            or set(metadata.get("properties", {})) - {"name", "generateName"}
            or any(child.get("type") != "string" for child in metadata.get("properties", {}).values())
        ):
            problems.append(
                "openAPIV3Schema.properties[metadata]: must not specify anything other than "
                "name and generateName (of type string)"
            )
        return sorted(problems)

    def _structural(self, node: dict, path: str, root: bool = False, junctor: bool = False,
                    int_or_string: bool = False) -> Iterator[str]:
        if junctor:
            forbidden = {"type", "nullable", "default", "additionalProperties"}
            forbidden |= {key for key in node if key.startswith("x-kubernetes-")}
            if int_or_string and node.get("type") in ("integer", "string") and len(node) == 1:
                forbidden.discard("type")
            for key in sorted(forbidden & node.keys()):
                yield f"{path}.{key}: must not be set inside allOf/anyOf/oneOf/not"
        else:
            yield from self._node_problems(node, path, root)
        int_or_string = int_or_string or bool(node.get("x-kubernetes-int-or-string"))
        for suffix, key, child in _children(node):
            if not (root and key == "metadata"):
                yield from self._structural(child, path + suffix, junctor=junctor, int_or_string=int_or_string)
        if isinstance(node.get("not"), dict):
            yield from self._structural(node["not"], f"{path}.not", junctor=True, int_or_string=int_or_string)
        for key in ("allOf", "anyOf", "oneOf"):
            for index, child in enumerate(node.get(key, [])):
                yield from self._structural(child, f"{path}.{key}[{index}]", junctor=True,
                                            int_or_string=int_or_string)

    def _node_problems(self, node: dict, path: str, root: bool) -> Iterator[str]:
        kind = node.get("type")
        if root and kind != "object":
            yield f"{path}.type: must be object at the root"
        if not (kind or node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")):
            yield f"{path}.type: must not be empty unless x-kubernetes-int-or-string or -preserve-unknown-fields"
        if "properties" in node and "additionalProperties" in node:
            yield f"{path}: properties and additionalProperties are mutually exclusive"
        if node.get("uniqueItems"):
            yield f"{path}.uniqueItems: must not be true; use x-kubernetes-list-type: set"
        if node.get("x-kubernetes-preserve-unknown-fields") is False:
            yield f"{path}.x-kubernetes-preserve-unknown-fields: must be true or undefined"
        if node.get("x-kubernetes-embedded-resource") and (
            kind != "object" or not (node.get("properties") or node.get("x-kubernetes-preserve-unknown-fields"))
        ):
            yield f"{path}: an embedded resource needs type object and properties or preserve-unknown-fields"
        yield from self._list_problems(node, path)
        if "default" in node:
            default = copy.deepcopy(node["default"])
            _apply_defaults(default, node)
            validator = _Validator(_json_schema(node), registry=_schemas(KUBERNETES_VERSION)[1],
                                   format_checker=_FORMATS)
            for _, message in _schema_errors(validator, default):
                yield f"{path}.default: {message}"
            for message in self._rule_errors(default, node, ""):
                yield f"{path}.default: {message}"
        for index, rule in enumerate(node.get("x-kubernetes-validations", [])):
            yield from self._rule_problems(node, path, index, rule)

    def _list_problems(self, node: dict, path: str) -> Iterator[str]:
        keys = node.get("x-kubernetes-list-map-keys")
        if node.get("x-kubernetes-list-type") != "map":
            if keys:
                yield f"{path}.x-kubernetes-list-map-keys: only allowed with x-kubernetes-list-type: map"
            return
        items = node.get("items") if isinstance(node.get("items"), dict) else {}
        if items.get("type") != "object":
            yield f"{path}.items.type: must be object for x-kubernetes-list-type: map"
        if not keys:
            yield f"{path}.x-kubernetes-list-map-keys: required for x-kubernetes-list-type: map"
        for key in keys or []:
            prop = items.get("properties", {}).get(key)
            if prop is None:
                yield f"{path}.x-kubernetes-list-map-keys: {key!r} is not a property of the items"
            elif prop.get("type") in ("array", "object"):
                yield f"{path}.items.properties[{key}].type: a list map key must be a scalar"
            elif key not in items.get("required", []) and "default" not in prop:
                yield f"{path}.items.properties[{key}]: a list map key must be required or have a default"

    def _rule_problems(self, node: dict, node_path: str, index: int, rule: dict) -> Iterator[str]:
        path = f"{node_path}.x-kubernetes-validations[{index}]"
        text = rule.get("rule", "")
        compiled = text
        if _OLD_SELF.search(text):  # compile a transition rule with oldSelf bound to a value like self
            compiled = f"[{'optional.of(self)' if rule.get('optionalOldSelf') else 'self'}].all(oldSelf, {text})"
        for label, expression in (("rule", compiled), ("messageExpression", rule.get("messageExpression"))):
            if expression:
                try:
                    _cel_env().compile(expression)
                except RuntimeError as exc:
                    yield f"{path}.{label}: does not compile: {str(exc).splitlines()[0]}"
        # The apiserver rejects rules whose estimated cost is unbounded: approximated here as
        # a rule on an unbounded node, or one naming an unbounded field below it.
        if bound := _unbounded(node):
            yield f"{path}: rule {text!r} sits on a node without {bound}; its CEL cost is unbounded"
        resource = node is self.schema or bool(node.get("x-kubernetes-embedded-resource"))
        for below, name, missing in _unbounded_below(node, node_path, resource=resource):
            # Unnamed (the items or values of the rule's own node) are reached by iterating self.
            if name is None or re.search(rf"\b{re.escape(name)}\b", text):
                yield f"{path}: rule {text!r} uses {below}, which has no {missing}; its CEL cost is unbounded"


def _field_path(path: str, field_path: str) -> str:
    if not field_path:
        return path
    return path + field_path if path or field_path.startswith("[") else field_path.lstrip(".")


@functools.cache
def _crd_validator(path: Path, version: str | None) -> CRDValidator:
    with path.open() as stream:
        return CRDValidator(yaml.load(stream, Loader=yaml.CSafeLoader), version)
