"""Label selectors (equality- and set-based) and field selectors: parse, print, match.

The grammar and the canonical printed form follow the API server's (``k8s.io/apimachinery``
labels and fields packages), so a selector we print is the one the server parses, a selector we
parse is rejected here exactly when the server would reject it, and matching in a local cache gives
the same answer as a server-side ``labelSelector``.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

__all__ = [
    "FieldRequirement",
    "FieldSelector",
    "FieldSelectorLike",
    "LabelSelector",
    "LabelSelectorLike",
    "Operator",
    "Requirement",
    "Selection",
    "SelectorError",
    "Selectors",
    "field_selector_text",
    "label_selector_text",
]


class SelectorError(ValueError):
    """A selector string or dict that the API server would reject; the message says where."""


class Operator(enum.StrEnum):
    """The operators of a label selector requirement (``=``, ``!=``, ``in``, ``notin``, exists, ``!`` does not
    exist, ``gt``, ``lt``).
    """

    EQUALS = "="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def validate_label_key(key: str) -> None:
    """A qualified name: optional DNS-subdomain prefix (<= 253) + '/' + name (<= 63)."""
    prefix, slash, name = key.rpartition("/")
    if slash:
        if not prefix:
            raise SelectorError(f"invalid label key {key!r}: prefix part must be non-empty")
        if len(prefix) > 253 or not _DNS1123_SUBDOMAIN_RE.match(prefix):
            raise SelectorError(f"invalid label key {key!r}: prefix must be a lowercase DNS subdomain")
    if not name:
        raise SelectorError(f"invalid label key {key!r}: name part must be non-empty")
    if len(name) > 63:
        raise SelectorError(f"invalid label key {key!r}: name part must be at most 63 characters")
    if not _NAME_RE.match(name):
        raise SelectorError(
            f"invalid label key {key!r}: name part must consist of alphanumerics, '-', '_' or '.', "
            "and start and end with an alphanumeric"
        )


def validate_label_value(key: str, value: str) -> None:
    """Empty, or <= 63 characters of alphanumerics, '-', '_', '.' starting/ending alphanumeric."""
    if value == "":
        return
    if len(value) > 63:
        raise SelectorError(f"invalid value {value!r} for label {key!r}: must be at most 63 characters")
    if not _NAME_RE.match(value):
        raise SelectorError(
            f"invalid value {value!r} for label {key!r}: must consist of alphanumerics, '-', '_' or '.', "
            "and start and end with an alphanumeric"
        )


@dataclass(frozen=True, slots=True)
class Requirement:
    """One clause of a label selector. Build through :meth:`create` to get validation."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    @classmethod
    def create(cls, key: str, operator: Operator | str, values: Iterable[str] = ()) -> Requirement:
        """A validated requirement: the key is a valid label key, ``=`` and ``!=`` have one value, ``in`` and
        ``notin`` at least one, existence tests none; raises SelectorError naming what is wrong.
        """
        op = Operator(operator)
        vals = tuple(sorted(set(values)))
        validate_label_key(key)
        if op in (Operator.EQUALS, Operator.NOT_EQUALS) and len(vals) != 1:
            raise SelectorError(f"label {key!r}: operator {op.value!r} needs exactly one value")
        if op in (Operator.IN, Operator.NOT_IN) and not vals:
            raise SelectorError(f"label {key!r}: operator {op.value!r} needs at least one value")
        if op in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and vals:
            raise SelectorError(f"label {key!r}: operator {op.value!r} takes no values")
        if op in (Operator.GREATER_THAN, Operator.LESS_THAN):
            if len(vals) != 1:
                raise SelectorError(f"label {key!r}: operator {op.value!r} needs exactly one value")
            try:
                int(vals[0])
            except ValueError:
                raise SelectorError(
                    f"label {key!r}: operator {op.value!r} needs an integer value, got {vals[0]!r}"
                ) from None
        else:
            for v in vals:
                validate_label_value(key, v)
        return cls(key, op, vals)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this requirement."""
        op = self.operator
        if op is Operator.EXISTS:
            return self.key in labels
        if op is Operator.DOES_NOT_EXIST:
            return self.key not in labels
        value = labels.get(self.key)
        if op is Operator.EQUALS or op is Operator.IN:
            return value is not None and value in self.values
        if op is Operator.NOT_EQUALS or op is Operator.NOT_IN:
            return value is None or value not in self.values
        # gt / lt: both sides must be integers; a non-integer label never matches.
        if value is None:
            return False
        try:
            have = int(value)
        except ValueError:
            return False
        want = int(self.values[0])
        return have > want if op is Operator.GREATER_THAN else have < want

    def __str__(self) -> str:
        op = self.operator
        if op is Operator.EXISTS:
            return self.key
        if op is Operator.DOES_NOT_EXIST:
            return f"!{self.key}"
        if op in (Operator.IN, Operator.NOT_IN):
            return f"{self.key} {op.value} ({','.join(self.values)})"
        symbol = {Operator.GREATER_THAN: ">", Operator.LESS_THAN: "<"}.get(op, op.value)
        return f"{self.key}{symbol}{self.values[0]}"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """An AND of requirements, kept sorted by key; the empty selector matches everything.

    ``LabelSelector.parse("app=web,tier in (a,b),!legacy")``, ``LabelSelector.from_dict(spec)``
    (a metav1.LabelSelector with matchLabels/matchExpressions) or ``LabelSelector.from_labels(
    {"app": "web"})``; ``str(selector)`` is the query-string form.
    """

    requirements: tuple[Requirement, ...] = ()

    @classmethod
    def of(cls, requirements: Iterable[Requirement]) -> LabelSelector:
        """A selector of ``requirements`` (sorted by key, so equal selectors compare equal)."""
        return cls(tuple(sorted(requirements, key=lambda r: r.key)))

    @classmethod
    def parse(cls, text: str) -> LabelSelector:
        """Parse a label selector's text (``app=web,tier in (a,b),!canary``); raises SelectorError naming the
        problem.
        """
        try:
            return cls.of(_LabelParser(text).parse())
        except SelectorError as e:
            raise SelectorError(f"invalid label selector {text!r}: {e}") from None

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> LabelSelector:
        """The selector matching exactly these labels (each ``key=value``)."""
        return cls.of(Requirement.create(k, Operator.EQUALS, (v,)) for k, v in labels.items())

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any] | None) -> LabelSelector:
        """From a metav1.LabelSelector dict. ``None`` and ``{}`` both select everything."""
        if not spec:
            return cls()
        reqs = [
            Requirement.create(k, Operator.EQUALS, (v,)) for k, v in (spec.get("matchLabels") or {}).items()
        ]
        ops = {"In": Operator.IN, "NotIn": Operator.NOT_IN, "Exists": Operator.EXISTS}
        ops["DoesNotExist"] = Operator.DOES_NOT_EXIST
        for i, expr in enumerate(spec.get("matchExpressions") or ()):
            op_name = expr.get("operator")
            if op_name not in ops:
                raise SelectorError(
                    f"matchExpressions[{i}].operator: {op_name!r} is not In, NotIn, Exists or DoesNotExist"
                )
            reqs.append(Requirement.create(expr.get("key", ""), ops[op_name], expr.get("values") or ()))
        return cls.of(reqs)

    def to_dict(self) -> dict[str, Any]:
        """The metav1.LabelSelector form; gt/lt have no such form and raise SelectorError."""
        match_labels: dict[str, str] = {}
        exprs: list[dict[str, Any]] = []
        names = {Operator.IN: "In", Operator.NOT_IN: "NotIn", Operator.EXISTS: "Exists"}
        names[Operator.DOES_NOT_EXIST] = "DoesNotExist"
        for r in self.requirements:
            if r.operator is Operator.EQUALS and r.key not in match_labels:
                match_labels[r.key] = r.values[0]
            elif r.operator is Operator.NOT_EQUALS:
                exprs.append({"key": r.key, "operator": "NotIn", "values": list(r.values)})
            elif r.operator in names:
                expr: dict[str, Any] = {"key": r.key, "operator": names[r.operator]}
                if r.values:
                    expr["values"] = list(r.values)
                exprs.append(expr)
            elif r.operator is Operator.EQUALS:
                exprs.append({"key": r.key, "operator": "In", "values": list(r.values)})
            else:
                raise SelectorError(f"requirement {r} cannot be expressed as a metav1.LabelSelector")
        out: dict[str, Any] = {}
        if match_labels:
            out["matchLabels"] = match_labels
        if exprs:
            out["matchExpressions"] = exprs
        return out

    @property
    def is_empty(self) -> bool:
        """True when the selector has no requirement (it matches everything)."""
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether ``labels`` (None: no labels) satisfy every requirement."""
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def __and__(self, other: LabelSelector) -> LabelSelector:
        return LabelSelector.of((*self.requirements, *other.requirements))

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


_SPECIAL = frozenset("=!(),<>")
_WHITESPACE = frozenset(" \t\r\n")
_SYMBOLS = ("!=", "==", "=", "!", "(", ")", ",", ">", "<")


class _LabelParser:
    """Tokenizer + recursive descent over the label selector grammar.

    Identifiers run until whitespace or one of ``=!(),<>``; ``in``/``notin`` are keywords only in
    operator position, so ``x in (in)`` is valid, as on the server.
    """

    def __init__(self, text: str) -> None:
        self.tokens = self._lex(text)
        self.pos = 0

    @staticmethod
    def _lex(text: str) -> list[tuple[str, str]]:
        tokens: list[tuple[str, str]] = []
        i, n = 0, len(text)
        while i < n:
            ch = text[i]
            if ch in _WHITESPACE:
                i += 1
            elif ch in _SPECIAL:
                for sym in _SYMBOLS:
                    if text.startswith(sym, i):
                        tokens.append(("sym", sym))
                        i += len(sym)
                        break
                else:  # pragma: no cover - every special char starts some symbol
                    raise SelectorError(f"unexpected {ch!r}")
            else:
                j = i
                while j < n and text[j] not in _SPECIAL and text[j] not in _WHITESPACE:
                    j += 1
                tokens.append(("id", text[i:j]))
                i = j
        tokens.append(("end", ""))
        return tokens

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.pos]

    def take(self) -> tuple[str, str]:
        tok = self.tokens[self.pos]
        self.pos += 1
        return tok

    @staticmethod
    def describe(tok: tuple[str, str]) -> str:
        return "end of string" if tok[0] == "end" else repr(tok[1])

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        if self.peek()[0] == "end":
            return reqs
        while True:
            reqs.append(self.requirement())
            tok = self.take()
            if tok[0] == "end":
                return reqs
            if tok != ("sym", ","):
                raise SelectorError(f"found {self.describe(tok)}, expected ',' or end of string")
            nxt = self.peek()
            if nxt[0] != "id" and nxt != ("sym", "!"):
                raise SelectorError(f"found {self.describe(nxt)}, expected an identifier after ','")

    def requirement(self) -> Requirement:
        tok = self.take()
        negate = tok == ("sym", "!")
        if negate:
            tok = self.take()
        if tok[0] != "id":
            raise SelectorError(f"found {self.describe(tok)}, expected a label key")
        key = tok[1]
        nxt = self.peek()
        if nxt[0] == "end" or nxt == ("sym", ","):
            return Requirement.create(key, Operator.DOES_NOT_EXIST if negate else Operator.EXISTS)
        if negate:
            raise SelectorError(f"found {self.describe(nxt)} after '!{key}', expected ',' or end of string")
        op_tok = self.take()
        ops = {
            ("sym", "="): Operator.EQUALS,
            ("sym", "=="): Operator.EQUALS,
            ("sym", "!="): Operator.NOT_EQUALS,
            ("sym", ">"): Operator.GREATER_THAN,
            ("sym", "<"): Operator.LESS_THAN,
            ("id", "in"): Operator.IN,
            ("id", "notin"): Operator.NOT_IN,
        }
        op = ops.get(op_tok)
        if op is None:
            raise SelectorError(
                f"found {self.describe(op_tok)} after {key!r}, expected one of =, ==, !=, in, notin, >, <"
            )
        if op in (Operator.IN, Operator.NOT_IN):
            return Requirement.create(key, op, self.value_set())
        nxt = self.peek()
        if nxt[0] == "end" or nxt == ("sym", ","):
            return Requirement.create(key, op, ("",))
        val = self.take()
        if val[0] != "id":
            raise SelectorError(f"found {self.describe(val)}, expected a value for {key!r}")
        return Requirement.create(key, op, (val[1],))

    def value_set(self) -> list[str]:
        tok = self.take()
        if tok != ("sym", "("):
            raise SelectorError(f"found {self.describe(tok)}, expected '('")
        values: list[str] = []
        expect_value = True
        while True:
            tok = self.take()
            if tok == ("sym", ")"):
                if expect_value:
                    values.append("")  # "()" and "(a,)" carry the empty value, as on the server
                return values
            if tok == ("sym", ","):
                if expect_value:
                    values.append("")
                expect_value = True
            elif tok[0] == "id" and expect_value:
                values.append(tok[1])
                expect_value = False
            else:
                raise SelectorError(f"found {self.describe(tok)}, expected ',', ')' or a value")


# -- field selectors ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    value: str
    negate: bool = False

    def matches(self, fields: Mapping[str, str]) -> bool:
        have = fields.get(self.field)
        return (have != self.value) if self.negate else (have == self.value)

    def __str__(self) -> str:
        return f"{self.field}{'!=' if self.negate else '='}{_escape_field_value(self.value)}"


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """``metadata.name=foo,status.phase!=Running``; values escape ``\\``, ``,`` and ``=`` with ``\\``.

    Which fields a kind supports is up to the server (always ``metadata.name`` and
    ``metadata.namespace``); :meth:`matches` takes a flat mapping of field path -> value, and
    :meth:`matches_object` reads dotted paths from an object dict.
    """

    requirements: tuple[FieldRequirement, ...] = ()

    @classmethod
    def parse(cls, text: str) -> FieldSelector:
        """Parse a field selector's text (``metadata.name=web,status.phase!=Running``); raises SelectorError
        naming the problem.
        """
        reqs: list[FieldRequirement] = []
        for term in _split_unescaped(text):
            if not term:
                continue
            split = _split_term(term)
            if split is None:
                raise SelectorError(f"invalid field selector {text!r}: {term!r} has no operator (=, ==, !=)")
            field_name, op, raw_value = split
            if not field_name:
                raise SelectorError(f"invalid field selector {text!r}: empty field name in {term!r}")
            value = _unescape_field_value(raw_value, text)
            reqs.append(FieldRequirement(field_name, value, op == "!="))
        return cls(tuple(sorted(reqs, key=lambda r: r.field)))

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> FieldSelector:
        """The selector matching exactly these field values (each ``field=value``)."""
        return cls(tuple(sorted((FieldRequirement(k, v) for k, v in fields.items()), key=lambda r: r.field)))

    @property
    def is_empty(self) -> bool:
        """True when the selector has no requirement (it matches everything)."""
        return not self.requirements

    def matches(self, fields: Mapping[str, str]) -> bool:
        """Whether the given field values satisfy every requirement."""
        return all(r.matches(fields) for r in self.requirements)

    def matches_object(self, obj: Mapping[str, Any]) -> bool:
        """Whether an object (a dict) satisfies every requirement, reading each field by its dotted path."""
        fields = {r.field: _dotted(obj, r.field) for r in self.requirements}
        return all(r.matches(fields) for r in self.requirements)  # type: ignore[arg-type]

    def __and__(self, other: FieldSelector) -> FieldSelector:
        return FieldSelector(tuple(sorted((*self.requirements, *other.requirements), key=lambda r: r.field)))

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def _dotted(obj: Mapping[str, Any], path: str) -> str | None:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(part)
    if cur is None:
        return None
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def _escape_field_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _unescape_field_value(value: str, text: str) -> str:
    out: list[str] = []
    escaped = False
    for ch in value:
        if escaped:
            if ch not in "\\,=":
                raise SelectorError(f"invalid field selector {text!r}: invalid escape sequence '\\{ch}'")
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in ",=":
            raise SelectorError(f"invalid field selector {text!r}: unescaped {ch!r} in value {value!r}")
        else:
            out.append(ch)
    if escaped:
        raise SelectorError(f"invalid field selector {text!r}: value {value!r} ends with a lone '\\'")
    return "".join(out)


def _split_term(term: str) -> tuple[str, str, str] | None:
    """Split at the leftmost unescaped operator, preferring ``!=`` and ``==`` over ``=`` there."""
    i = 0
    while i < len(term):
        if term[i] == "\\":
            i += 2
            continue
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
        i += 1
    return None


def _split_unescaped(text: str) -> list[str]:
    terms: list[str] = []
    cur: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            cur.append(text[i : i + 2])
            i += 2
            continue
        if ch == ",":
            terms.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    terms.append("".join(cur))
    return terms


# -- the selector arguments of list, watch and delete-collection calls ------------------------------

#: What a ``label_selector=`` argument accepts: the query-string form, a :class:`LabelSelector`,
#: or a mapping of labels that must all equal.
LabelSelectorLike = str | LabelSelector | Mapping[str, str]
#: What a ``field_selector=`` argument accepts: the query-string form, a :class:`FieldSelector`,
#: or a mapping of fields that must all equal.
FieldSelectorLike = str | FieldSelector | Mapping[str, str]


def label_selector_text(selector: LabelSelectorLike | None) -> str | None:
    """Normalise any accepted label-selector form to the query-string form (``None`` = none)."""
    if selector is None:
        return None
    if isinstance(selector, str):
        return selector or None
    if isinstance(selector, LabelSelector):
        return str(selector) or None
    return str(LabelSelector.from_labels(selector)) or None


def field_selector_text(selector: FieldSelectorLike | None) -> str | None:
    """Normalise any accepted field-selector form to the query-string form (``None`` = none)."""
    if selector is None:
        return None
    if isinstance(selector, str):
        return selector or None
    if isinstance(selector, FieldSelector):
        return str(selector) or None
    return str(FieldSelector.from_fields(selector)) or None


@dataclass(frozen=True, slots=True)
class Selectors:
    """The label and field selector of one list or watch, as one value.

    The public calls (``Client.list``, ``RequestBuilder.watch``, ``SharedInformerFactory.informer``
    ...) take ``label_selector=`` and ``field_selector=`` in any accepted form; each makes one
    ``Selectors`` with :meth:`of`, and the layers below pass that along. Both are held in the
    query-string form (None: no selector), so two equal selectors are equal values (an informer
    is shared by equal ones).

    The client's collection calls also take one directly, ``selectors=Selectors.of(...)``,
    beside (or instead of) the two keywords (:class:`Selection`); :meth:`merge` makes the one
    value a call uses of both.
    """

    labels: str | None = None
    fields: str | None = None

    @classmethod
    def of(
        cls, label_selector: LabelSelectorLike | None = None, field_selector: FieldSelectorLike | None = None
    ) -> Selectors:
        """The selectors of a call's ``label_selector=`` and ``field_selector=`` arguments."""
        return cls(label_selector_text(label_selector), field_selector_text(field_selector))

    @classmethod
    def merge(
        cls,
        selectors: Selectors | None,
        label_selector: LabelSelectorLike | None = None,
        field_selector: FieldSelectorLike | None = None,
    ) -> Selectors:
        """The selectors of a call that takes ``selectors=`` beside ``label_selector=`` and
        ``field_selector=``: each as given when given one way; given both ways, an object must
        match both (the two are joined with ``,``, which is "and" in both grammars)."""
        given = cls.of(label_selector, field_selector)
        if selectors is None:
            return given
        if given.labels is None and given.fields is None:
            return selectors
        return cls(_both(selectors.labels, given.labels), _both(selectors.fields, given.fields))

    @classmethod
    def of_selection(cls, selection: Selection, *, call: str) -> Selectors:
        """The selectors of a call that takes :class:`Selection`'s keywords as ``**selection``
        (:meth:`merge` of them); a keyword it does not know is a TypeError naming ``call``."""
        if not selection:
            return _NONE
        for keyword in selection:
            if keyword not in _SELECTION:
                raise TypeError(
                    f"{call}() got an unexpected keyword argument {keyword!r} (its selector keywords "
                    f"are {', '.join(sorted(_SELECTION))})"
                )
        return cls.merge(
            selection.get("selectors"), selection.get("label_selector"), selection.get("field_selector")
        )

    def with_name(self, name: str) -> Selectors:
        """These selectors narrowed to the object ``name`` (a ``metadata.name`` field selector)."""
        by_name = str(FieldSelector.from_fields({"metadata.name": name}))
        return Selectors(self.labels, f"{self.fields},{by_name}" if self.fields else by_name)

    def query(self) -> list[tuple[str, str]]:
        """The query parameters (``labelSelector``, ``fieldSelector``) of a request."""
        query = [("labelSelector", self.labels)] if self.labels else []
        if self.fields:
            query.append(("fieldSelector", self.fields))
        return query

    def describe(self) -> str:
        """For logs: `` with labels a=b with fields c=d`` (empty without selectors)."""
        labels = f" with labels {self.labels}" if self.labels else ""
        return labels + (f" with fields {self.fields}" if self.fields else "")


_NONE = Selectors()


class Selection(TypedDict, total=False):
    """The keywords with which every collection call of the client (``list``, ``list_stream``,
    ``pages``, ``list_all``, ``watch``, ``delete_collection``) chooses objects by their labels and
    fields, declared once: ``label_selector=`` and ``field_selector=`` in any accepted form, or both
    as one value, ``selectors=``; given both ways, an object must match both (:meth:`Selectors.merge`)."""

    label_selector: LabelSelectorLike | None
    field_selector: FieldSelectorLike | None
    selectors: Selectors | None


_SELECTION = frozenset(Selection.__annotations__)


def _both(a: str | None, b: str | None) -> str | None:
    """Two selectors in the query-string form, as one that needs both (None: none)."""
    return f"{a},{b}" if (a and b) else (a or b)
