"""The CronTab validator accepts what a CronJob's schedule accepts (robfig/cron v3's standard
parser, TZ= refused as kube-apiserver does): the named cases, and a property test against
cronsim's parser, which agrees with robfig/cron but for the differences listed here."""

from __future__ import annotations

import base64
import datetime as dt
import re

import orjson
import pytest
from cronsim import CronSim, CronSimError
from examples.crontab.cron import cron_problem, normalized
from examples.crontab.schedule import CronSchedule, InvalidSchedule
from examples.crontab.webhooks.crontab_v1beta1 import default, validate
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kubeop.webhook.review import decode_admission


def accepted(expression: str) -> bool:
    """What the CronTab's validator accepts: a CronJob's schedule that names a time."""
    if cron_problem(expression) is not None:
        return False
    try:
        CronSchedule(expression)
    except InvalidSchedule:
        return False
    return True


@pytest.mark.parametrize(
    "expression",
    [
        "@hourly",
        "@daily",
        "@midnight",
        "@weekly",
        "@monthly",
        "@yearly",
        "@annually",
        "0 0 * * MON",
        "0 0 * JAN *",
        "0 0 1 jan-mar mon-fri",
        "*/15 9-17 * * 1-5",
        "5/15 * * * *",
        "0 0 ? * sat",
        "05 +3 * * *",
        "0  0   * * *",
        "59 23 31 12 6",
        "*/61 * * * *",  # a step past the range keeps the first value: once an hour
    ],
)
def test_what_a_cronjob_accepts_is_accepted(expression: str) -> None:
    assert cron_problem(expression) is None and accepted(expression)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("* * *", "has 3 space-separated fields"),
        ("61 * * * *", "minute '61' is outside 0-59"),
        ("0 0 * * 7", "day of week '7' is outside 0-6"),  # robfig/cron: Sunday is 0 only
        ("0 0 * * SAT-SUN", "runs backwards"),
        ("*/0 * * * *", "must be at least 1"),
        ("0 0 * MON *", "'MON' is not a number or a name"),
        ("@HOURLY", "not a descriptor"),  # robfig/cron matches descriptors as spelt
        ("TZ=Europe/Berlin 0 0 * * *", "set the timeZone field"),
        ("CRON_TZ=UTC 0 0 * * *", "set the timeZone field"),
        ("@every 5m", "@every is not supported"),  # a documented difference from CronJob
        ("", "empty"),
    ],
)
def test_what_a_cronjob_refuses_is_refused_with_the_reason(expression: str, message: str) -> None:
    problem = cron_problem(expression)
    assert problem is not None and message in problem


def test_the_reading_is_robfig_crons() -> None:
    assert normalized("@hourly") == "0 * * * *"
    assert normalized("0 0 * * MON-FRI") == "0 0 * * 1-5"
    assert normalized("5/15 * ? jan sun") == "5-59/15 * * 1 0"
    assert normalized("*/2,5 * * * *") == "0-59/2,5 * * * *"  # a step makes a restricted field
    assert normalized("*-5 * * * *") == "* * * * *"  # robfig/cron ignores what follows '*'
    monday = CronSchedule("0 9 * * mon").next_after(dt.datetime(2026, 11, 27, tzinfo=dt.UTC))
    assert monday == dt.datetime(2026, 11, 30, 9, tzinfo=dt.UTC)


# -- the property test against cronsim ------------------------------------------------------------

_FIELD_BOUNDS = (
    (0, 59, ()),
    (0, 23, ()),
    (1, 31, ()),
    (1, 12, ("JAN", "mar", "Dec")),
    (0, 6, ("MON", "sun", "Sat")),
)
_GARBAGE = st.sampled_from(["", "0x", "a", "-1", "FOO", "MONDAY", "L", "?", "+5", "007", "99"])


def _field(low: int, high: int, names: tuple[str, ...]) -> st.SearchStrategy[str]:
    """Mostly a valid field, now and then one token out of range or of another dialect."""
    number = st.integers(low, high).map(str)
    atom = st.one_of(number, st.sampled_from(names)) if names else number
    edge = st.sampled_from([str(low - 1), str(high + 1), str(high + 2), "JAN", "MON"]) | _GARBAGE
    token = st.one_of(atom, atom, atom, atom, atom, atom, atom, atom, edge)
    span = st.one_of(token, st.just("*"), st.builds(lambda a, b: f"{a}-{b}", token, token))
    item = st.one_of(span, span, st.builds(lambda r, n: f"{r}/{n}", span, st.integers(0, high + 1)))
    return st.lists(item, min_size=1, max_size=2).map(",".join)


_EXPRESSIONS = st.one_of(
    st.tuples(*(_field(*bounds) for bounds in _FIELD_BOUNDS)).map(" ".join),
    st.lists(_field(0, 59, ()), min_size=4, max_size=6).map(" ".join),
)

_NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def cronsim_accepts(expression: str) -> bool:
    try:
        CronSim(expression, _NOW)
    except CronSimError:
        return False
    return True


def known_difference(expression: str) -> str | None:
    """Where cronsim's dialect (Debian cron's, with extensions) and robfig/cron's part ways."""
    fields = expression.split()
    if len(fields) == 6:
        return "cronsim takes six fields (seconds first); a CronJob five"
    if "+" in expression:
        return "robfig/cron reads numbers with Go's strconv.Atoi, which takes a sign ('+5'); cronsim does not"
    if "?" in expression:
        return "robfig/cron takes '?' for '*' in every field; cronsim does not"
    if "*-" in expression:
        return "robfig/cron ignores what follows '*' ('*-5' is '*'); cronsim refuses it"
    if len(fields) == 5 and "L" in fields[2].upper():
        return "cronsim takes 'L' for the month's last day; robfig/cron refuses it"
    if len(fields) == 5 and re.search(r"(^|[,-])0*7($|[,/-])", fields[4]):
        return "cronsim reads 7 in the day of week as Sunday; robfig/cron refuses it"
    return None


@settings(max_examples=1000, deadline=None)
@given(_EXPRESSIONS)
@example("0 0 * * MON")
@example("0 0 * JAN *")
@example("1-5/2 0 1 1 0")
@example("0 0 L 1 0")
def test_accepts_iff_cronsim_does_but_for_the_documented_differences(expression: str) -> None:
    if known_difference(expression) is not None:
        return
    assert accepted(expression) == cronsim_accepts(expression), (
        expression,
        cron_problem(expression),
    )


async def test_a_descriptor_is_defaulted_to_fields_so_it_converts_to_v1() -> None:
    obj = {
        "apiVersion": "stable.example.com/v1beta1",
        "kind": "CronTab",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"cronSpec": "@hourly", "image": "busybox", "replicas": 1},
    }
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
    review = decode_admission(
        orjson.dumps({**body, "request": {"uid": "u", "operation": "CREATE", "object": obj}})
    )
    assert orjson.loads(await validate.review(review))["response"]["allowed"] is True
    out = orjson.loads(await default.review(review))["response"]
    patch = orjson.loads(base64.b64decode(out["patch"]))
    assert patch == [{"op": "replace", "path": "/spec/cronSpec", "value": "0 * * * *"}]
