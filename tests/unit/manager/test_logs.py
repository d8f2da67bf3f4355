"""kubeop's log formatters and configure_logging: fields in text and JSON, no objects, env and errors."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator

import pytest

from kubeop.controller import Context, Request
from kubeop.controller.context import _running
from kubeop.manager import configure_logging
from kubeop.manager.logs import JsonFormatter, TextFormatter


def _record(msg: str = "hello %s", *args: object, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("kubeop.controller", logging.INFO, __file__, 1, msg, args or ("world",), None)
    record.__dict__.update(extra)
    record.created = 1795150861.234  # 2026-11-20T05:01:01.234Z
    record.msecs = 234
    return record


def _ctx() -> Context:
    return Context(Request("shop", "web"), None, None, "memcached", kind="Memcached")  # type: ignore[arg-type]


def test_text_outside_a_reconcile_is_the_plain_line() -> None:
    assert TextFormatter().format(_record()) == "2026-11-20T05:01:01.234Z INFO kubeop.controller: hello world"


def test_text_names_the_reconcile_from_the_record_or_the_running_one() -> None:
    ctx = _ctx()
    tail = f" controller=memcached kind=Memcached object=shop/web reconcileID={ctx.reconcile_id}"
    assert TextFormatter().format(_record(**ctx.log_fields())).endswith("hello world" + tail)
    token = _running.set(ctx)
    try:
        assert TextFormatter().format(_record()).endswith("hello world" + tail)
    finally:
        _running.reset(token)
    cluster = Context(Request("", "node-1"), None, None, "nodes", kind="Node")  # type: ignore[arg-type]
    assert " object=node-1 " in TextFormatter().format(_record(**cluster.log_fields()))


def test_text_puts_the_traceback_below_its_line() -> None:
    try:
        raise KeyError("spec")
    except KeyError:
        record = _record(exc_info=sys.exc_info(), **_ctx().log_fields())
        record.exc_info = sys.exc_info()
    first, *rest = TextFormatter().format(record).splitlines()
    assert first.startswith(
        "2026-11-20T05:01:01.234Z INFO kubeop.controller: hello world controller=memcached"
    )
    assert rest[0] == "Traceback (most recent call last):" and rest[-1] == "KeyError: 'spec'"


def test_reconcile_ids_are_short_and_unique() -> None:
    ids = {_ctx().reconcile_id for _ in range(10_000)}
    assert len(ids) == 10_000 and all(len(i) == 10 for i in ids)
    ctx = _ctx()
    assert ctx.reconcile_id == ctx.reconcile_id


def test_json_has_the_fields_and_only_scalar_extras() -> None:
    ctx = _ctx()
    secret = {"apiVersion": "v1", "kind": "Secret", "data": {"password": "aHVudGVyMg=="}}
    line = JsonFormatter().format(
        _record(**ctx.log_fields(), attempt=3, ready=True, obj=secret, items=[secret])
    )
    assert json.loads(line) == {
        "ts": "2026-11-20T05:01:01.234Z",
        "level": "info",
        "logger": "kubeop.controller",
        "msg": "hello world",
        "controller": "memcached",
        "kind": "Memcached",
        "namespace": "shop",
        "name": "web",
        "reconcileID": ctx.reconcile_id,
        "attempt": 3,
        "ready": True,
    }
    assert "aHVudGVyMg" not in line


def test_json_error_and_traceback() -> None:
    try:
        raise ValueError("spec.size: must be positive")
    except ValueError:
        record = _record()
        record.exc_info = sys.exc_info()
    out = json.loads(JsonFormatter().format(record))
    assert out["error"] == "ValueError: spec.size: must be positive"
    assert out["traceback"].startswith("Traceback (most recent call last):")
    assert "controller" not in out and "reconcileID" not in out
    short = json.loads(JsonFormatter().format(_record(error="KeyError: 'spec'")))
    assert short["error"] == "KeyError: 'spec'" and "traceback" not in short


@pytest.fixture
def root() -> Iterator[logging.Logger]:
    logger = logging.getLogger()
    handlers, level = list(logger.handlers), logger.level
    try:
        yield logger
    finally:
        logger.handlers[:] = handlers
        logger.setLevel(level)


def test_configure_logging_reads_the_environment(
    root: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBEOP_LOG_FORMAT", "json")
    monkeypatch.setenv("KUBEOP_LOG_LEVEL", "DEBUG")
    stream = io.StringIO()
    configure_logging(stream=stream)
    assert root.level == logging.DEBUG
    logging.getLogger("kubeop.test").debug("hi %d", 1)
    assert json.loads(stream.getvalue())["msg"] == "hi 1"
    # Arguments win over the environment, and a second call replaces the first handler.
    stream2 = io.StringIO()
    configure_logging("text", "warning", stream=stream2)
    assert [h.get_name() for h in root.handlers].count("kubeop") == 1
    logging.getLogger("kubeop.test").info("quiet")
    logging.getLogger("kubeop.test").warning("loud")
    assert stream2.getvalue().endswith(" WARNING kubeop.test: loud\n") and "quiet" not in stream2.getvalue()


def test_configure_logging_defaults_to_text_at_info(
    root: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBEOP_LOG_FORMAT", raising=False)
    monkeypatch.delenv("KUBEOP_LOG_LEVEL", raising=False)
    handler = configure_logging(stream=io.StringIO())
    assert isinstance(handler.formatter, TextFormatter) and root.level == logging.INFO


@pytest.mark.parametrize(
    ("fmt", "level", "said"),
    [
        ("xml", None, "log format must be one of text, json (or KUBEOP_LOG_FORMAT), got 'xml'"),
        (
            None,
            "loud",
            "log level must be one of debug, info, warning, error, critical (or KUBEOP_LOG_LEVEL)",
        ),
    ],
)
def test_configure_logging_refuses_what_it_does_not_know(
    root: logging.Logger, fmt: str | None, level: str | None, said: str
) -> None:
    with pytest.raises(ValueError, match=said.replace("(", r"\(").replace(")", r"\)")):
        configure_logging(fmt, level)


def test_text_escapes_line_breaks_so_a_value_cannot_forge_a_line() -> None:
    forged = "web\n2026-11-20T05:01:01.234Z INFO kubeop.controller: deleted everything"
    line = TextFormatter().format(
        _record("reconciled %s", forged, controller="c\r\nx", object_namespace="shop", object_name="a\nb")
    )
    assert len(line.splitlines()) == 1
    assert "reconciled web\\n2026" in line and "controller=c\\r\\nx" in line and "object=shop/a\\nb" in line


def test_json_leaves_credentials_out_of_extras() -> None:
    record = _record(
        "calling %s",
        "https://api",
        Authorization="Bearer abc.def",
        token="s3cr3t",
        bearer_token="s3cr3t",
        password="hunter2",
        header="Bearer xyz",
        secret="shop/db-credentials",  # a Secret's name is not a credential
    )
    out = json.loads(JsonFormatter().format(record))
    text = json.dumps(out)
    assert "abc.def" not in text and "s3cr3t" not in text and "hunter2" not in text and "xyz" not in text
    assert out["Authorization"] == out["token"] == out["password"] == "<redacted>"
    assert out["secret"] == "shop/db-credentials"


def test_json_never_fails_on_an_extra() -> None:
    class Broken:
        def __str__(self) -> str:
            raise RuntimeError("no str")

    record = _record(ratio=float("nan"), big=float("inf"), controller=Broken(), kind=b"bytes")
    out = json.loads(JsonFormatter().format(record))  # strict JSON: no NaN/Infinity
    assert out["ratio"] == "nan" and out["big"] == "inf" and out["controller"].startswith("<")
