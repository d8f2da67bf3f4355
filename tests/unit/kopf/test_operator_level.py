"""kubeop.kopf's operator-level parts without a cluster: activities (startup, cleanup, login,
probe) and their retries, settings, kopf.label, the CLI's arguments and KopfRunner's results."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

import kubeop.kopf as kopf
from kubeop.kopf.__main__ import parse
from kubeop.kopf.activities import Activity, ActivityError, client_config, run_activity
from kubeop.kopf.running import _stop_hung, _wait
from kubeop.kopf.settings import current_settings, default_backoff, reset_settings, use_settings
from kubeop.kopf.testing import KopfRunner

log = logging.getLogger("test")


def kwargs() -> dict[str, Any]:
    return {"logger": log, "memo": kopf.Memo(), "settings": kopf.OperatorSettings()}


async def test_startup_handlers_retry_as_kopf_and_run_in_order(caplog: pytest.LogCaptureFixture) -> None:
    reg = kopf.Registry()
    calls: list[tuple[str, int]] = []

    @kopf.on.startup(registry=reg, id="simple")
    async def simple(retry: int, **_: Any) -> str:
        calls.append(("simple", retry))
        return "ok"

    @kopf.on.startup(registry=reg, id="retried")
    def retried(retry: int, activity: str, **_: Any) -> None:  # sync: in a thread
        calls.append(("retried", retry))
        assert activity == "startup"
        if retry < 2:
            raise kopf.TemporaryError("not yet", delay=0.01)

    caplog.set_level(logging.DEBUG)
    results = await run_activity(
        reg.activities(Activity.STARTUP), Activity.STARTUP, logger=log, kwargs=kwargs()
    )
    assert results == {"simple": "ok", "retried": None}
    assert calls == [("simple", 0), ("retried", 0), ("retried", 1), ("retried", 2)]
    assert caplog.text.count("Activity 'retried' succeeded.") == 1
    assert "Activity 'retried' failed temporarily: not yet" in caplog.text


async def test_an_activity_failing_for_good_raises_naming_the_handler() -> None:
    reg = kopf.Registry()

    @kopf.on.cleanup(registry=reg, id="broken", errors=kopf.ErrorsMode.PERMANENT)
    def broken(**_: Any) -> None:
        raise RuntimeError("boom")

    @kopf.on.cleanup(registry=reg, id="flaky", retries=2, backoff=0)
    def flaky(**_: Any) -> None:
        raise RuntimeError("again")

    with pytest.raises(ActivityError, match="cleanup handlers failed: broken, flaky") as info:
        await run_activity(reg.activities(Activity.CLEANUP), Activity.CLEANUP, logger=log, kwargs=kwargs())
    assert set(info.value.outcomes) == {"broken", "flaky"}


def test_activity_decorators_reject_unknown_arguments_and_duplicates() -> None:
    reg = kopf.Registry()
    with pytest.raises(TypeError, match=r"@kopf.on.startup of .*fn.*unknown argument\(s\) labels"):

        @kopf.on.startup(registry=reg, labels={"a": "b"})
        def fn(**_: Any) -> None: ...

    with pytest.raises(ValueError, match="retries= is a whole number"):
        kopf.on.probe(registry=reg, retries=-1)(lambda **_: None)

    @kopf.on.login(registry=reg)
    def login(**_: Any) -> None: ...

    with pytest.raises(ValueError, match="registered twice"):
        kopf.on.login(registry=reg)(login)


def test_settings_default_backoff_applies_to_handlers_without_their_own() -> None:
    assert default_backoff(None) == 60.0 and default_backoff(2) == 2
    settings = kopf.OperatorSettings()
    settings.execution.default_backoff = 1
    token = use_settings(settings)
    try:
        assert current_settings() is settings and default_backoff(None) == 1
    finally:
        reset_settings(token)
    with pytest.raises(AttributeError):
        settings.watching.no_such_field = 1  # type: ignore[attr-defined]


def test_connection_info_becomes_kubeops_client_config() -> None:
    info = kopf.ConnectionInfo(
        server="https://127.0.0.1:6443", token="t", insecure=True, default_namespace="x"
    )
    config = client_config(info)
    assert (config.server, config.token, config.insecure_skip_tls_verify, config.namespace) == (
        "https://127.0.0.1:6443",
        "t",
        True,
        "x",
    )
    with pytest.raises(ValueError, match="ca_path or ca_data"):
        kopf.ConnectionInfo(server="https://x", ca_path="/a", ca_data="b")


def test_label_sets_missing_keys_and_nested_templates() -> None:
    obj: dict[str, Any] = {"metadata": {"labels": {"a": "mine"}}, "spec": {"template": {}}}
    kopf.label(obj, {"a": "x", "b": "y"}, nested="spec.template")
    assert obj["metadata"]["labels"] == {"a": "mine", "b": "y"}
    assert obj["spec"]["template"]["metadata"]["labels"] == {"a": "x", "b": "y"}
    kopf.label([obj], {"a": "x"}, forced=True)
    assert obj["metadata"]["labels"]["a"] == "x"
    with pytest.raises(LookupError, match="pass labels="):
        kopf.label(obj)


def test_cli_arguments_as_kopf_run_takes_them() -> None:
    args = parse(["run", "--all-namespaces", "--standalone", "--verbose", "x.py"])
    assert (args.paths, args.namespaces, args.standalone, args.verbose) == (("x.py",), (), True, True)
    peered = parse(["run", "--peering", "team", "--priority", "5", "-n", "ns", "x.py"])
    assert peered.operator_options()["peering_name"] == "team" and peered.standalone is False
    assert peered.namespaces == ("ns",)
    several = parse(["run", "-n", "a", "--namespace", "team-*,!team-test", "x.py"])
    assert several.operator_options()["namespaces"] == ("a", "team-*,!team-test")
    for bad in (["run", "-n", "a", "-A", "x.py"], ["run", "-n", "a,,b", "x.py"], ["run"]):
        with pytest.raises(SystemExit):
            parse(bad)


async def test_flags_of_every_kind_kopf_takes() -> None:
    for flag in (asyncio.Event(), threading.Event(), asyncio.get_running_loop().create_future()):
        into = asyncio.Event()
        waiting = asyncio.create_task(_wait(flag, into))
        await asyncio.sleep(0.01)
        assert not into.is_set()
        if isinstance(flag, asyncio.Future):
            flag.set_result(None)
        else:
            flag.set()
        await asyncio.wait_for(waiting, 2)
        assert into.is_set()


async def test_tasks_left_by_handlers_get_cancelled_after_the_grace() -> None:
    finished = asyncio.create_task(asyncio.sleep(0))
    hung = asyncio.create_task(asyncio.sleep(60))
    await _stop_hung({finished, hung}, grace=0.05)
    assert finished.done() and hung.cancelled()


def test_kopf_runner_reports_usage_errors_and_exceptions(tmp_path: Any) -> None:
    with KopfRunner(["run", "-n", "a", "-A", "x.py"], reraise=False) as runner:
        pass
    assert runner.exit_code == 2 and "exclude each other" in runner.output
    script = tmp_path / "broken.py"
    script.write_text("raise RuntimeError('no handlers here')\n")
    runner = KopfRunner(["run", str(script)], registry=kopf.Registry())
    with pytest.raises(RuntimeError, match="no handlers here"), runner:
        pass
    assert runner.exit_code == 1 and isinstance(runner.exception, RuntimeError)
    running = KopfRunner(["run", str(script)])
    with pytest.raises(RuntimeError, match="after the with block"):
        running.output  # noqa: B018 - the property raises


async def test_the_operator_does_not_start_when_a_startup_handler_fails_for_good() -> None:
    reg = kopf.Registry()
    cleaned: list[str] = []

    @kopf.on.startup(registry=reg, id="refuse")
    def refuse(**_: Any) -> None:
        raise kopf.PermanentError("no database")

    @kopf.on.cleanup(registry=reg, id="cleanup")
    def cleanup(**_: Any) -> None:
        cleaned.append("yes")

    ready = threading.Event()
    with pytest.raises(ActivityError, match="startup handlers failed: refuse"):
        await kopf.operator(registry=reg, ready_flag=ready)
    assert not ready.is_set() and cleaned == [], "not started: nothing to clean up"
