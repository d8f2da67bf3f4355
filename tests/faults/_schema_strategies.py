"""Hypothesis strategies derived from a CRD's structural OpenAPI v3 schema.

:func:`valid` draws values the API server must accept; :func:`invalid` draws values with exactly
one violation and says where it is (:class:`Violation`: the path in the server's notation, e.g.
``spec.ports[1].port``, and what was broken), so a test can check that the server's 422 names that
field. Supported: ``type`` (object, array, string, integer, number, boolean), ``properties``,
``required``, ``additionalProperties``, ``min/maxProperties``, ``items``, ``min/maxItems``,
``x-kubernetes-list-type`` set/map (with ``x-kubernetes-list-map-keys``), ``min/maxLength``,
``pattern``, ``enum``, ``format: hostname``, ``minimum``/``maximum`` (and their exclusive
forms), ``nullable``, ``default``.

CEL rules (``x-kubernetes-validations``) are opaque to a schema walker: the caller passes a
Python predicate per rule (``rules={"self.a <= self.b": lambda v: ...}``), evaluated on the
value *after* the schema's defaults are applied (as the server does). Valid values satisfy every
rule; an invalid value may break exactly one (its path is the node plus the rule's ``fieldPath``).
A schema with a rule that has no predicate raises :class:`KeyError`, rather than guessing.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

__all__ = [
    "Violation",
    "apply_defaults",
    "go_regex",
    "invalid",
    "render_path",
    "schema_at",
    "valid",
    "value_at",
]

Schema = Mapping[str, Any]
Rules = Mapping[str, Callable[[Any], bool]]
Path = tuple[str | int, ...]

INT64 = (-(2**63), 2**63 - 1)
# JSON text without surrogates (not encodable as UTF-8) or NULs (etcd keeps them, but they make
# error messages unreadable).
TEXT = st.characters(codec="utf-8", exclude_characters="\x00")
# What go-openapi's hostname format accepts (kube-openapi strfmt.HostnamePattern): one label with
# at most one hyphen, after its first character ("ab-c" is not a hostname), or dotted labels
# ending in 2-63 letters ("0.0" and "a.a" are not).
HOSTNAME_LABEL = r"[a-z]([a-z0-9-]{0,8}[a-z0-9])?"
HOSTNAME = rf"[a-z][a-z0-9]{{0,10}}|({HOSTNAME_LABEL}\.){{1,2}}[a-z]{{2,6}}"
NOT_IN_HOSTNAMES = " _!@#%*&(),;:?/\\\"'"


@dataclass(frozen=True)
class Violation:
    """Where a drawn invalid value breaks the schema (``path``) and which constraint (``what``)."""

    path: Path
    what: str

    def render(self, root: str = "") -> str:
        return render_path((root, *self.path) if root else self.path)


def render_path(path: Path) -> str:
    """The API server's notation of a field path: ``spec.ports[1].port``, and map keys after a dot
    as they are (``spec.labels.app.kubernetes.io/name``)."""
    out = ""
    for seg in path:
        if isinstance(seg, int):
            out += f"[{seg}]"
        else:
            out += f".{seg}" if out else seg
    return out


def schema_at(schema: Schema, path: Path) -> Schema:
    """The schema node a path leads to (through properties, items and additionalProperties)."""
    node = schema
    for seg in path:
        if isinstance(seg, int):
            node = node["items"]
        elif seg in (node.get("properties") or {}):
            node = node["properties"][seg]
        else:
            node = node["additionalProperties"]
    return node


def value_at(value: Any, path: Path) -> Any:
    for seg in path:
        value = value[seg]
    return value


def go_regex(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled with Go's (RE2's) meaning of ``$``: end of text only (Python's ``$``
    also matches before a final newline, so ``"abc\\n"`` would look valid to Python and not to Go)."""
    out, i, in_class = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if pattern[i + 1 : i + 2] == "]":  # "[]...]" : the first ] is a literal
                out.append("[]")
                i += 2
                continue
        elif c == "$":
            c = r"\Z"
        out.append(c)
        i += 1
    return re.compile("".join(out))


def _type(schema: Schema) -> str:
    if schema.get("x-kubernetes-int-or-string"):
        return "int-or-string"
    t = schema.get("type")
    if t is None:
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return "any"
        raise ValueError(f"schema node without a type: {dict(schema)!r}")
    return str(t)


def apply_defaults(schema: Schema, value: Any) -> Any:
    """``value`` with the schema's defaults filled in (as the API server does before validating)."""
    t = schema.get("type")
    if t == "object" and isinstance(value, dict):
        out = dict(value)
        for name, prop in (schema.get("properties") or {}).items():
            if name not in out and "default" in prop:
                out[name] = prop["default"]
            if name in out:
                out[name] = apply_defaults(prop, out[name])
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            for key in out:
                if key not in (schema.get("properties") or {}):
                    out[key] = apply_defaults(extra, out[key])
        return out
    if t == "array" and isinstance(value, list) and "items" in schema:
        return [apply_defaults(schema["items"], v) for v in value]
    return value


def _rules_hold(schema: Schema, value: Any, rules: Rules) -> bool:
    checks = schema.get("x-kubernetes-validations") or ()
    if not checks:
        return True
    defaulted = apply_defaults(schema, value)
    return all(rules[check["rule"]](defaulted) for check in checks)


def _check_rules_known(schema: Schema, rules: Rules) -> None:
    for check in schema.get("x-kubernetes-validations") or ():
        if check["rule"] not in rules:
            raise KeyError(f"no Python predicate for the CEL rule {check['rule']!r}: pass it in rules=")


# -- valid values -----------------------------------------------------------------------------------
def valid(schema: Schema, rules: Rules | None = None) -> st.SearchStrategy[Any]:
    """Values that satisfy ``schema`` (and every CEL rule in it, per ``rules``)."""
    rules = rules or {}
    _check_rules_known(schema, rules)
    base = _valid_unchecked(schema, rules)
    if schema.get("x-kubernetes-validations"):
        base = base.filter(lambda v: _rules_hold(schema, v, rules))
    return base


def _string(schema: Schema) -> st.SearchStrategy[str]:
    lo, hi = schema.get("minLength", 0), schema.get("maxLength")
    if "enum" in schema:
        return st.sampled_from(list(schema["enum"]))
    if schema.get("format") == "hostname":
        strat: st.SearchStrategy[str] = st.from_regex(HOSTNAME, fullmatch=True)
    elif "pattern" in schema:
        rx = go_regex(schema["pattern"])
        strat = st.from_regex(str(schema["pattern"])).filter(lambda s: rx.search(s) is not None)
    else:
        return st.text(TEXT, min_size=lo, max_size=hi if hi is not None else 40)
    return strat.filter(lambda s: lo <= len(s) and (hi is None or len(s) <= hi))


def _number_bounds(schema: Schema) -> tuple[float | None, float | None, bool, bool]:
    return (
        schema.get("minimum"),
        schema.get("maximum"),
        bool(schema.get("exclusiveMinimum")),
        bool(schema.get("exclusiveMaximum")),
    )


def _integer(schema: Schema) -> st.SearchStrategy[int]:
    if "enum" in schema:
        return st.sampled_from(list(schema["enum"]))
    lo, hi, xlo, xhi = _number_bounds(schema)
    low = INT64[0] if lo is None else int(lo) + (1 if xlo else 0)
    high = INT64[1] if hi is None else int(hi) - (1 if xhi else 0)
    return st.integers(low, high)


def _number(schema: Schema) -> st.SearchStrategy[float]:
    lo, hi, xlo, xhi = _number_bounds(schema)
    return st.floats(
        min_value=lo,
        max_value=hi,
        exclude_min=xlo and lo is not None,
        exclude_max=xhi and hi is not None,
        allow_nan=False,
        allow_infinity=False,
        allow_subnormal=False,
    )


def _list_unique_by(schema: Schema) -> Callable[[Any], Any] | None:
    kind = schema.get("x-kubernetes-list-type")
    if kind == "set":
        return lambda v: repr(v)
    if kind == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or ()
        defaults = {k: (schema["items"].get("properties") or {}).get(k, {}).get("default") for k in keys}
        return lambda v: tuple(repr(v.get(k, defaults[k])) for k in keys)
    return None


def _valid_unchecked(schema: Schema, rules: Rules) -> st.SearchStrategy[Any]:
    t = _type(schema)
    strat: st.SearchStrategy[Any]
    if t == "string":
        strat = _string(schema)
    elif t == "integer":
        strat = _integer(schema)
    elif t == "number":
        strat = _number(schema) | _integer({k: v for k, v in schema.items() if k != "format"}).filter(
            lambda i: abs(i) < 2**53
        )
    elif t == "boolean":
        strat = st.booleans()
    elif t == "int-or-string":
        strat = st.integers(-1000, 1000) | st.text(string.ascii_letters, max_size=8)
    elif t == "any":
        strat = st.just({})
    elif t == "array":
        strat = st.lists(
            valid(schema["items"], rules),
            min_size=schema.get("minItems", 0),
            max_size=schema.get("maxItems", 5),
            unique_by=_list_unique_by(schema),
        )
    elif t == "object":
        strat = _object(schema, rules)
    else:
        raise ValueError(f"unsupported schema type {t!r}")
    if schema.get("nullable"):
        strat = st.none() | strat
    return strat


def _object(schema: Schema, rules: Rules) -> st.SearchStrategy[dict[str, Any]]:
    props: Mapping[str, Schema] = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping) and not props:
        return st.dictionaries(
            st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True),
            valid(extra, rules),
            min_size=schema.get("minProperties", 0),
            max_size=schema.get("maxProperties", 4),
        )
    if not props:
        return st.just({})
    return st.fixed_dictionaries(
        {k: valid(props[k], rules) for k in props if k in required},
        optional={k: valid(props[k], rules) for k in props if k not in required},
    )


# -- invalid values -----------------------------------------------------------------------------------
def invalid(schema: Schema, rules: Rules | None = None) -> st.SearchStrategy[tuple[Any, Violation]]:
    """A value with exactly one violation of ``schema``, and where it is (relative to the node)."""
    rules = rules or {}
    _check_rules_known(schema, rules)
    options = _violations(schema, rules)
    if not options:
        raise ValueError("this schema cannot be violated (it accepts anything)")
    # Each kind of violation equally likely (one_of favours its first branches).
    return st.sampled_from(options).flatmap(lambda strategy: strategy)


def _at(path: Path, what: str) -> Callable[[Any], tuple[Any, Violation]]:
    return lambda v: (v, Violation(path, what))


def _wrong_type(t: str) -> st.SearchStrategy[Any]:
    """A JSON value that is not of type ``t`` (never null: the server prunes nulls it may not keep)."""
    others: dict[str, st.SearchStrategy[Any]] = {
        "string": st.integers(-5, 5) | st.booleans() | st.just([1]),
        "integer": st.text(string.ascii_letters, min_size=1, max_size=5)
        | st.booleans()
        | st.floats(-1e6, 1e6).filter(lambda f: f != int(f)),
        "number": st.text(string.ascii_letters, min_size=1, max_size=5) | st.booleans() | st.just({}),
        "boolean": st.integers(0, 5) | st.sampled_from(["true", "yes"]),
        "array": st.text(string.ascii_letters, min_size=1, max_size=5) | st.integers() | st.just({"a": 1}),
        "object": st.text(string.ascii_letters, min_size=1, max_size=5) | st.integers() | st.just([1, 2]),
    }
    return others[t]


def _violations(schema: Schema, rules: Rules) -> list[st.SearchStrategy[tuple[Any, Violation]]]:
    t = _type(schema)
    if t in ("any", "int-or-string"):
        return []
    here: list[st.SearchStrategy[tuple[Any, Violation]]] = []
    if t == "string":
        here += _string_violations(schema)
    elif t in ("integer", "number"):
        here += _number_violations(schema, t)
    elif t == "array":
        here += _array_violations(schema, rules)
    elif t == "object":
        here += _object_violations(schema, rules)
    for check in schema.get("x-kubernetes-validations") or ():
        here.append(_rule_violation(schema, rules, check))
    here.append(_wrong_type(t).map(_at((), "type")))
    return here


def _rule_violation(
    schema: Schema, rules: Rules, check: Mapping[str, Any]
) -> st.SearchStrategy[tuple[Any, Violation]]:
    """Values valid but for the CEL rule ``check`` (every other rule of the node holds)."""
    others = [rules[c["rule"]] for c in schema["x-kubernetes-validations"] if c["rule"] != check["rule"]]
    pred = rules[check["rule"]]

    def breaks_only_this(value: Any) -> bool:
        defaulted = apply_defaults(schema, value)
        return not pred(defaulted) and all(p(defaulted) for p in others)

    segments = re.findall(r"\.([A-Za-z_][A-Za-z0-9_]*)|\['([^']*)'\]", check.get("fieldPath", ""))
    where: Path = tuple(a or b for a, b in segments)
    return _valid_unchecked(schema, rules).filter(breaks_only_this).map(_at(where, f"rule {check['rule']}"))


def _string_violations(schema: Schema) -> list[st.SearchStrategy[tuple[Any, Violation]]]:
    out: list[st.SearchStrategy[tuple[Any, Violation]]] = []
    hi, lo = schema.get("maxLength"), schema.get("minLength", 0)
    alphabet = string.ascii_lowercase
    if "enum" in schema:
        allowed = set(schema["enum"])
        out.append(st.text(TEXT, max_size=12).filter(lambda s: s not in allowed).map(_at((), "enum")))
        return out
    if hi is not None:
        out.append(st.text(alphabet, min_size=hi + 1, max_size=hi + 20).map(_at((), "maxLength")))
    if lo > 0:
        out.append(st.text(alphabet, max_size=lo - 1).map(_at((), "minLength")))
    if "pattern" in schema:
        rx = go_regex(schema["pattern"])
        out.append(
            st.text(TEXT, min_size=max(lo, 1), max_size=hi if hi is not None else 20)
            .filter(lambda s: rx.search(s) is None)
            .map(_at((), "pattern"))
        )
    if schema.get("format") == "hostname":
        out.append(
            st.tuples(
                st.from_regex(HOSTNAME_LABEL, fullmatch=True),
                st.sampled_from(NOT_IN_HOSTNAMES),
                st.from_regex(HOSTNAME_LABEL, fullmatch=True),
            )
            .map("".join)
            .filter(lambda s: lo <= len(s) and (hi is None or len(s) <= hi))
            .map(_at((), "format hostname"))
        )
    return out


def _number_violations(schema: Schema, t: str) -> list[st.SearchStrategy[tuple[Any, Violation]]]:
    out: list[st.SearchStrategy[tuple[Any, Violation]]] = []
    lo, hi, xlo, xhi = _number_bounds(schema)
    if "enum" in schema:
        allowed = set(schema["enum"])
        out.append(st.integers(-100, 100).filter(lambda i: i not in allowed).map(_at((), "enum")))
    if hi is not None:
        above: st.SearchStrategy[float] = st.integers(int(hi) + 1, int(hi) + 10**6)
        if xhi:
            above = st.just(int(hi)) | above
        if t == "number":
            above = st.one_of(above, st.floats(hi, hi + 1e6, exclude_min=not xhi, allow_nan=False))
        out.append(above.map(_at((), "maximum")))
    if lo is not None:
        below: st.SearchStrategy[float] = st.integers(int(lo) - 10**6, int(lo) - 1)
        if xlo:
            below = st.just(int(lo)) | below
        if t == "number":
            below = st.one_of(below, st.floats(lo - 1e6, lo, exclude_max=not xlo, allow_nan=False))
        out.append(below.map(_at((), "minimum")))
    return out


def _array_violations(schema: Schema, rules: Rules) -> list[st.SearchStrategy[tuple[Any, Violation]]]:
    out: list[st.SearchStrategy[tuple[Any, Violation]]] = []
    item = schema["items"]
    unique_by = _list_unique_by(schema)
    lo, hi = schema.get("minItems", 0), schema.get("maxItems")
    if hi is not None:
        out.append(
            st.lists(valid(item, rules), min_size=hi + 1, max_size=hi + 3, unique_by=unique_by).map(
                _at((), "maxItems")
            )
        )
    if lo > 0:
        out.append(
            st.lists(valid(item, rules), max_size=lo - 1, unique_by=unique_by).map(_at((), "minItems"))
        )
    max_ok = hi if hi is not None else 4
    if max_ok >= 1:
        # One bad item among good ones.
        @st.composite
        def one_bad_item(draw: st.DrawFn) -> tuple[Any, Violation]:
            good = draw(
                st.lists(
                    valid(item, rules), min_size=max(lo, 1) - 1, max_size=max_ok - 1, unique_by=unique_by
                )
            )
            bad, where = draw(invalid(item, rules))
            index = draw(st.integers(0, len(good)))
            values = [*good[:index], bad, *good[index:]]
            if unique_by is not None and bad is not None and where.what != "type":
                try:
                    keys = [unique_by(v) for v in values]
                except (AttributeError, TypeError):
                    keys = []
                if len(set(keys)) != len(keys):  # the bad item also duplicates a key: two errors
                    from hypothesis import reject

                    reject()
            return values, Violation((index, *where.path), where.what)

        out.append(one_bad_item())
    if unique_by is not None and max_ok >= 2:

        @st.composite
        def duplicate(draw: st.DrawFn) -> tuple[Any, Violation]:
            good = draw(
                st.lists(valid(item, rules), min_size=max(lo, 1), max_size=max_ok - 1, unique_by=unique_by)
            )
            twin = dict(good[0]) if isinstance(good[0], dict) else good[0]
            return [*good, twin], Violation((len(good),), "duplicate")

        out.append(duplicate())
    return out


def _object_violations(schema: Schema, rules: Rules) -> list[st.SearchStrategy[tuple[Any, Violation]]]:
    out: list[st.SearchStrategy[tuple[Any, Violation]]] = []
    props: Mapping[str, Schema] = schema.get("properties") or {}
    required = list(schema.get("required") or ())
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping) and not props:
        hi = schema.get("maxProperties")
        keys = st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True)
        if hi is not None:
            out.append(
                st.dictionaries(keys, valid(extra, rules), min_size=hi + 1, max_size=hi + 3).map(
                    _at((), "maxProperties")
                )
            )

        @st.composite
        def bad_value(draw: st.DrawFn) -> tuple[Any, Violation]:
            good = draw(st.dictionaries(keys, valid(extra, rules), max_size=(hi or 4) - 1))
            key = draw(keys.filter(lambda k: k not in good))
            bad, where = draw(invalid(extra, rules))
            return {**good, key: bad}, Violation((key, *where.path), where.what)

        if _violations(extra, rules):
            out.append(bad_value())
        return out
    if not props:
        return out
    for name in required:
        others = {k: v for k, v in props.items() if k != name}
        rest = _object(
            {**schema, "properties": others, "required": [r for r in required if r != name]}, rules
        )
        missing = (
            rest
            if not schema.get("x-kubernetes-validations")
            else rest.filter(lambda v: _rules_hold(schema, v, rules))
        )
        out.append(missing.map(_at((name,), "required")))
    for name, prop in props.items():
        if not _violations(prop, rules):
            continue

        @st.composite
        def bad_property(draw: st.DrawFn, name: str = name, prop: Schema = prop) -> tuple[Any, Violation]:
            base = draw(valid(schema, rules))
            bad, where = draw(invalid(prop, rules))
            value = {**base, name: bad}
            if schema.get("x-kubernetes-validations") and where.what == "type":
                # A CEL rule over a mistyped field is not evaluated; only the type error is reported.
                pass
            elif schema.get("x-kubernetes-validations"):
                from hypothesis import assume

                try:
                    assume(_rules_hold(schema, value, rules))
                except (TypeError, AttributeError):
                    assume(False)
            return value, Violation((name, *where.path), where.what)

        out.append(bad_property())
    return out
