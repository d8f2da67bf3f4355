"""watches.yaml: which kinds a Helm operator reconciles, and with which chart.

The format is operator-sdk's, so an existing Helm operator project's file loads unchanged::

    - group: web.example.com
      version: v1
      kind: PhpDeployment
      chart: helm-charts/php-deployment     # relative to the directory of watches.yaml
      watchDependentResources: true         # default: true
      overrideValues:                       # Helm --set syntax on the left, $VAR / ${VAR} expanded
        image.pullPolicy: $PULL_POLICY
      selector:                             # metav1.LabelSelector: reconcile only matching objects
        matchLabels: {team: web}
      reconcilePeriod: 1m                   # Go duration; default: the operator's (1m)
      maxConcurrentReconciles: 2            # default: the operator's (number of CPUs)

:func:`load_watches` checks every field and raises :class:`WatchesError` naming the file, the
entry and the field; :func:`write_watches` writes the same format back (for scaffolding).

Differences from operator-sdk: override values get environment expansion (Go's ``os.ExpandEnv``
rules) but not the extra Go-template pass operator-sdk runs over them; ``dryRunOption`` is not
supported; relative chart paths are resolved against the file's directory rather than the working
directory (the same place for the usual layout, where both sit at the project root).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubeop.core.selectors import LabelSelector, SelectorError
from kubeop.core.yaml_input import load_yaml
from kubeop.helm.values import ValuesError, parse_path

__all__ = [
    "Watch",
    "WatchesError",
    "expand_env",
    "format_duration",
    "load_watches",
    "parse_duration",
    "parse_watches",
    "write_watches",
]

WATCHES_FILE = "watches.yaml"

_FIELDS = (
    "group",
    "version",
    "kind",
    "chart",
    "watchDependentResources",
    "overrideValues",
    "selector",
    "reconcilePeriod",
    "maxConcurrentReconciles",
)
_KIND = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_VERSION = re.compile(r"^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$")
_GROUP = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class WatchesError(ValueError):
    """watches.yaml cannot be used; the message names the file, the entry and the field."""


@dataclass(frozen=True)
class Watch:
    """One entry of watches.yaml: reconcile ``group/version/kind`` objects as releases of ``chart``.

    ``override_values`` are already environment-expanded; ``reconcile_period`` and
    ``max_concurrent_reconciles`` are None when the entry leaves them to the operator's defaults.
    """

    group: str
    version: str
    kind: str
    chart: Path
    watch_dependent_resources: bool = True
    override_values: Mapping[str, str] = field(default_factory=dict)
    selector: Mapping[str, Any] | None = None
    reconcile_period: float | None = None
    max_concurrent_reconciles: int | None = None

    @property
    def api_version(self) -> str:
        """``group/version`` of the watched kind."""
        return f"{self.group}/{self.version}"

    @property
    def label_selector(self) -> str | None:
        """The selector as a query string (``team=web``), or None for all objects."""
        if not self.selector:
            return None
        return str(LabelSelector.from_dict(self.selector)) or None

    def to_dict(self, base_dir: str | Path | None = None) -> dict[str, Any]:
        """The watches.yaml entry, with ``chart`` relative to ``base_dir`` when it lies below it.

        ``override_values`` are written as stored (after expansion): scaffolding writes entries it
        built itself, whose values were never expanded.
        """
        chart: str = str(self.chart)
        if base_dir is not None:
            try:
                chart = self.chart.resolve().relative_to(Path(base_dir).resolve()).as_posix()
            except ValueError:
                chart = str(self.chart)
        out: dict[str, Any] = {
            "group": self.group,
            "version": self.version,
            "kind": self.kind,
            "chart": chart,
        }
        if not self.watch_dependent_resources:
            out["watchDependentResources"] = False
        if self.override_values:
            out["overrideValues"] = dict(self.override_values)
        if self.selector:
            out["selector"] = dict(self.selector)
        if self.reconcile_period is not None:
            out["reconcilePeriod"] = format_duration(self.reconcile_period)
        if self.max_concurrent_reconciles is not None:
            out["maxConcurrentReconciles"] = self.max_concurrent_reconciles
        return out


# -- loading ------------------------------------------------------------------------------------


def load_watches(
    path: str | os.PathLike[str] = WATCHES_FILE, *, env: Mapping[str, str] | None = None
) -> list[Watch]:
    """Read and check a watches.yaml file (see the module docstring for the format).

    ``env`` is what ``$VAR`` in override values expands from (default: the process environment).
    Raises :class:`WatchesError` for a missing or unreadable file, bad YAML, or any invalid field.
    """
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise WatchesError(f"{p}: no such file (a Helm operator needs a watches.yaml)") from None
    except OSError as e:
        raise WatchesError(f"{p}: cannot read it: {e.strerror or e}") from None
    try:
        data = load_yaml(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or type(e).__name__
        raise WatchesError(f"{p}: not valid YAML{where}: {problem}") from None
    return parse_watches(data, base_dir=p.parent, source=str(p), env=env)


def parse_watches(
    data: Any,
    *,
    base_dir: str | Path = ".",
    source: str = WATCHES_FILE,
    env: Mapping[str, str] | None = None,
    check_charts: bool = True,
) -> list[Watch]:
    """Check already-parsed watches.yaml content (a list of entries) and build :class:`Watch` es.

    ``check_charts=False`` skips checking that each chart directory exists (for tools that write
    the chart later).
    """
    if data is None:
        return []
    if not isinstance(data, list):
        raise WatchesError(
            f"{source}: the top level must be a list of entries (`- group: ...`), got {_type_name(data)}"
        )
    environ = os.environ if env is None else env
    watches: list[Watch] = []
    seen: dict[tuple[str, str, str], int] = {}
    for i, entry in enumerate(data):
        w = _parse_entry(entry, i, Path(base_dir), source, environ, check_charts)
        gvk = (w.group, w.version, w.kind)
        if gvk in seen:
            raise WatchesError(
                f"{source}: entry {i} ({w.kind}): duplicate group/version/kind {w.api_version} {w.kind} "
                f"(also entry {seen[gvk]}); each kind can have only one chart"
            )
        seen[gvk] = i
        watches.append(w)
    return watches


def _parse_entry(
    entry: Any, i: int, base_dir: Path, source: str, env: Mapping[str, str], check_charts: bool
) -> Watch:
    if not isinstance(entry, Mapping):
        raise WatchesError(f"{source}: entry {i} must be a mapping with group, version, kind and chart")
    label = f"entry {i}" + (f" ({entry['kind']})" if isinstance(entry.get("kind"), str) else "")

    def fail(key: str, problem: str) -> WatchesError:
        return WatchesError(f"{source}: {label}: {key}: {problem}")

    for key in entry:
        if key not in _FIELDS:
            hint = _closest(str(key), _FIELDS)
            raise fail(
                str(key),
                "unknown field"
                + (f" (did you mean {hint!r}?)" if hint else f"; known: {', '.join(_FIELDS)}"),
            )
    group = _required_str(entry, "group", fail)
    if not _GROUP.match(group) or "." not in group:
        raise fail("group", f"{group!r} is not a DNS subdomain with a dot (for example 'web.example.com')")
    version = _required_str(entry, "version", fail)
    if not _VERSION.match(version):
        raise fail("version", f"{version!r} is not a Kubernetes version name (v1, v1beta1, v2alpha3)")
    kind = _required_str(entry, "kind", fail)
    if not _KIND.match(kind):
        raise fail("kind", f"{kind!r} is not CamelCase (for example 'PhpDeployment')")
    chart_text = _required_str(entry, "chart", fail)
    chart = Path(chart_text).expanduser()
    if not chart.is_absolute():
        chart = base_dir / chart
    if check_charts:
        if not chart.is_dir():
            raise fail("chart", f"{chart_text!r} is not a directory ({chart})")
        if not (chart / "Chart.yaml").is_file():
            raise fail("chart", f"{chart_text!r} is not a Helm chart: {chart}/Chart.yaml is missing")

    dependents = entry.get("watchDependentResources", True)
    if dependents is None:
        dependents = True
    if not isinstance(dependents, bool):
        raise fail("watchDependentResources", f"must be true or false, got {dependents!r}")

    overrides: dict[str, str] = {}
    raw_overrides = entry.get("overrideValues")
    if raw_overrides is not None:
        if not isinstance(raw_overrides, Mapping):
            raise fail(
                "overrideValues",
                f"must be a mapping of value paths to values, got {_type_name(raw_overrides)}",
            )
        for k, v in raw_overrides.items():
            if not isinstance(k, str) or not k:
                raise fail("overrideValues", f"key {k!r} must be a non-empty string such as 'image.tag'")
            try:
                parse_path(k)
            except ValuesError as e:
                raise fail(f"overrideValues.{k}", str(e)) from None
            if isinstance(v, bool):
                text = "true" if v else "false"
            elif isinstance(v, int | float | str):
                text = str(v)
            elif v is None:
                text = "null"
            else:
                raise fail(
                    f"overrideValues.{k}",
                    f"must be a scalar (a string, number or boolean), got {_type_name(v)}",
                )
            overrides[k] = expand_env(text, env)

    selector = entry.get("selector")
    if selector is not None:
        if not isinstance(selector, Mapping):
            raise fail(
                "selector",
                f"must be a label selector (matchLabels / matchExpressions), got {_type_name(selector)}",
            )
        unknown = [k for k in selector if k not in ("matchLabels", "matchExpressions")]
        if unknown:
            raise fail(
                f"selector.{unknown[0]}", "unknown field (a selector has matchLabels and matchExpressions)"
            )
        try:
            LabelSelector.from_dict(selector)
        except SelectorError as e:
            raise fail("selector", str(e)) from None
        selector = dict(selector) or None

    period: float | None = None
    raw_period = entry.get("reconcilePeriod")
    if raw_period is not None:
        try:
            period = parse_duration(raw_period)
        except ValueError as e:
            raise fail("reconcilePeriod", str(e)) from None

    workers: int | None = None
    raw_workers = entry.get("maxConcurrentReconciles")
    if raw_workers is not None:
        if isinstance(raw_workers, bool) or not isinstance(raw_workers, int) or raw_workers < 1:
            raise fail("maxConcurrentReconciles", f"must be a positive integer, got {raw_workers!r}")
        workers = raw_workers

    return Watch(
        group=group,
        version=version,
        kind=kind,
        chart=chart,
        watch_dependent_resources=dependents,
        override_values=overrides,
        selector=selector,
        reconcile_period=period,
        max_concurrent_reconciles=workers,
    )


def _required_str(entry: Mapping[str, Any], key: str, fail: Any) -> str:
    value = entry.get(key)
    if value is None or value == "":
        raise fail(key, "missing (every entry needs group, version, kind and chart)")
    if not isinstance(value, str):
        raise fail(key, f"must be a string, got {_type_name(value)} {value!r}")
    return value


def _type_name(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "a number"}.get(
        type(value), type(value).__name__
    )


def _closest(word: str, choices: Sequence[str]) -> str | None:
    import difflib

    found = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if found:
        return found[0]
    lowered = {c.lower(): c for c in choices}
    return lowered.get(word.lower())


# -- writing ------------------------------------------------------------------------------------


def write_watches(path: str | os.PathLike[str], watches: Iterable[Watch]) -> None:
    """Write ``watches`` as a watches.yaml file (chart paths relative to the file's directory).

    Refuses duplicates of the same group/version/kind with :class:`WatchesError`. To add one
    entry to an existing file: ``write_watches(p, [*load_watches(p), new_watch])``.
    """
    p = Path(path)
    entries = list(watches)
    seen: set[tuple[str, str, str]] = set()
    for w in entries:
        gvk = (w.group, w.version, w.kind)
        if gvk in seen:
            raise WatchesError(f"{p}: duplicate group/version/kind {w.api_version} {w.kind}")
        seen.add(gvk)
    body = yaml.safe_dump([w.to_dict(p.parent) for w in entries], sort_keys=False, default_flow_style=False)
    header = "# Use the 'create api' subcommand to add watches to this file.\n"
    p.write_text(header + (body if entries else "[]\n"))


# -- environment expansion ------------------------------------------------------------------------

_SPECIAL_VARS = frozenset("*#$@!?-0123456789")


def expand_env(text: str, env: Mapping[str, str] | None = None) -> str:
    """Replace ``$NAME`` and ``${NAME}`` with values from ``env`` (unset names become ``""``).

    The rules are Go's ``os.ExpandEnv``, which operator-sdk applies to override values: a name is
    letters, digits and ``_``; a single special character (``$1``, ``$*``, ``$$``) is a name too;
    a ``$`` followed by anything else stays as it is; ``${`` without a closing brace and ``${}``
    are dropped.
    """
    environ = os.environ if env is None else env
    if "$" not in text:
        return text
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch != "$" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        name, width = _shell_name(text, i + 1)
        if name:
            out.append(environ.get(name, ""))
        elif width == 0:
            out.append("$")  # not followed by a name: keep the dollar
        # else: bad syntax (``${`` or ``${}``): the characters are eaten, as Go does
        i += 1 + width
    return "".join(out)


def _shell_name(s: str, start: int) -> tuple[str, int]:
    """The variable name after a ``$`` at ``start`` and how many characters it spans."""
    first = s[start]
    if first == "{":
        if start + 2 < len(s) and s[start + 1] in _SPECIAL_VARS and s[start + 2] == "}":
            return s[start + 1], 3
        end = s.find("}", start + 1)
        if end == -1:
            return "", 1
        if end == start + 1:
            return "", 2
        return s[start + 1 : end], end - start + 1
    if first in _SPECIAL_VARS:
        return first, 1
    j = start
    while j < len(s) and (s[j].isascii() and (s[j].isalnum() or s[j] == "_")):
        j += 1
    return s[start:j], j - start


# -- durations ------------------------------------------------------------------------------------

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: Any) -> float:
    """Seconds from a Go duration string (``90s``, ``1m30s``, ``1h``, ``500ms``).

    A bare number is taken as seconds. Raises ValueError naming the accepted forms.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration (like 30s, 1m, 1h30m)")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(f"{value!r} is negative; a duration is at least 0")
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a duration (like 30s, 1m, 1h30m)")
    text = value.strip()
    if text in ("0", ""):
        if text == "":
            raise ValueError("an empty string is not a duration (like 30s, 1m, 1h30m)")
        return 0.0
    sign = 1.0
    if text[0] in "+-":
        sign = -1.0 if text[0] == "-" else 1.0
        text = text[1:]
    pos = 0
    total = 0.0
    while pos < len(text):
        m = _DURATION_PART.match(text, pos)
        if m is None:
            raise ValueError(f"{value!r} is not a duration (like 30s, 1m, 1h30m; units ns, us, ms, s, m, h)")
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if sign < 0 and total > 0:
        raise ValueError(f"{value!r} is negative; a duration is at least 0")
    return total


def format_duration(seconds: float) -> str:
    """The Go form of a duration: ``1m0s``, ``1h30m0s``, ``500ms``, ``0s``."""
    if seconds <= 0:
        return "0s"
    if seconds < 1:
        ms = seconds * 1000
        return f"{ms:g}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    out = ""
    if hours:
        out += f"{int(hours)}h"
    if hours or minutes:
        out += f"{int(minutes)}m"
    out += f"{secs:g}s"
    return out
