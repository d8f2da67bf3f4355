"""The Helm engine: argument building, isolation, errors, concurrency bound, timeouts, kubeconfig."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeop.client import ClientConfig, ExecConfig
from kubeop.helm.engine import (
    POSTRENDER_SCRIPT,
    Helm,
    HelmError,
    HelmNotFound,
    _error_text,
    find_helm,
    write_kubeconfig,
)

FAKE_HELM = textwrap.dedent(
    """\
    #!{python}
    import json, os, sys, time
    args = sys.argv[1:]
    stdin = sys.stdin.read() if not sys.stdin.isatty() else ""
    with open(os.environ["FAKE_HELM_LOG"], "a") as log:
        env = {{k: v for k, v in os.environ.items() if k.startswith(("HELM_", "KUBECONFIG"))}}
        log.write(json.dumps({{"args": args, "stdin": stdin, "start": time.time(), "env": env}}) + "\\n")
    values = json.loads(stdin) if stdin.strip() else {{}}
    if values.get("sleep"):
        time.sleep(values["sleep"])
    if values.get("fail"):
        print("WARNING: Kubernetes configuration file is group-readable", file=sys.stderr)
        print("Error: INSTALLATION FAILED: " + values["fail"], file=sys.stderr)
        print("second line", file=sys.stderr)
        sys.exit(1)
    if args[0] in ("install", "upgrade"):
        print(json.dumps({{"name": args[1], "namespace": "ns", "version": 3,
                          "info": {{"status": "deployed", "notes": "hi"}}, "config": values,
                          "manifest": "kind: X", "chart": {{"metadata": {{"name": "c", "version": "1"}}}}}}))
    elif args[0] == "version":
        print("v3.22.0")
    with open(os.environ["FAKE_HELM_LOG"], "a") as log:
        log.write(json.dumps({{"end": time.time()}}) + "\\n")
    """
)


@pytest.fixture
def fake_helm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    binary = tmp_path / "helm"
    binary.write_text(FAKE_HELM.format(python=sys.executable))
    binary.chmod(0o755)
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("FAKE_HELM_LOG", str(log))
    monkeypatch.setenv("HELM_NAMESPACE", "must-not-leak")
    monkeypatch.setenv("KUBECONFIG", "/must/not/leak")
    return binary, log


def calls(log: Path) -> list[dict[str, Any]]:
    return [c for c in (json.loads(line) for line in log.read_text().splitlines()) if "args" in c]


async def test_install_arguments_and_isolation(fake_helm: tuple[Path, Path], tmp_path: Path) -> None:
    binary, log = fake_helm
    helm = Helm(binary, kubeconfig=tmp_path / "kc")
    try:
        rel = await helm.install(
            "web", "ns", "/charts/php", {"image": "php:8.3", "n": 1}, post_renderer='{"x":1}'
        )
        assert (rel.name, rel.version, rel.status, rel.notes) == ("web", 3, "deployed", "hi")
        assert rel.config == {"image": "php:8.3", "n": 1}
        [call] = calls(log)
        assert call["args"][:8] == [
            "install",
            "web",
            "/charts/php",
            "--namespace",
            "ns",
            "--values",
            "-",
            "--output",
        ]
        assert f"--post-renderer={sys.executable}" in call["args"]
        assert "--post-renderer-args=-P" in call["args"]
        assert f"--post-renderer-args={POSTRENDER_SCRIPT}" in call["args"]
        assert '--post-renderer-args={"x":1}' in call["args"]
        assert call["args"][-2:] == ["--kubeconfig", str(tmp_path / "kc")]
        assert "--disable-openapi-validation" not in call["args"]
        assert json.loads(call["stdin"]) == {"image": "php:8.3", "n": 1}  # values on stdin, not argv
        env = call["env"]
        assert env["HELM_DRIVER"] == "secret"
        assert "HELM_NAMESPACE" not in env and "KUBECONFIG" not in env
        assert env["HELM_CACHE_HOME"].startswith(str(helm._home))
        assert helm.stats.calls == {"install": 1}
    finally:
        helm.close()
    assert not helm._home.exists()


async def test_upgrade_dry_run_rollback_uninstall_arguments(
    fake_helm: tuple[Path, Path], tmp_path: Path
) -> None:
    binary, log = fake_helm
    helm = Helm(binary, kubeconfig=tmp_path / "kc", openapi_validation=False, history_max=5)
    await helm.upgrade("web", "ns", "/c", {}, dry_run=True)
    await helm.upgrade("web", "ns", "/c", {}, force=True)
    await helm.rollback("web", "ns", 2, force=True)
    await helm.uninstall("web", "ns", wait=True)
    assert await helm.version() == "v3.22.0"
    dry, up, rb, un, ver = (c["args"] for c in calls(log))
    assert {"--reset-values", "--dry-run=server", "--disable-openapi-validation", "--history-max=5"} <= set(
        dry
    )
    assert "--force" not in dry
    assert {"--reset-values", "--force", "--disable-openapi-validation"} <= set(
        up
    ) and "--dry-run=server" not in up
    assert rb[:5] == ["rollback", "web", "2", "--namespace", "ns"] and "--force" in rb
    assert un[:5] == ["uninstall", "web", "--namespace", "ns", "--ignore-not-found"] and "--wait" in un
    assert ver == ["version", "--short"]  # no cluster flags
    assert helm.stats.calls == {"dry-run": 1, "upgrade": 1, "rollback": 1, "uninstall": 1, "version": 1}
    helm.close()


async def test_errors_carry_helms_message(fake_helm: tuple[Path, Path], tmp_path: Path) -> None:
    binary, _ = fake_helm
    helm = Helm(binary, kubeconfig=tmp_path / "kc")
    with pytest.raises(HelmError) as info:
        await helm.install("web", "ns", "/c", {"fail": "execution error at (x.yaml:1:2): image is required"})
    assert (
        info.value.message
        == "INSTALLATION FAILED: execution error at (x.yaml:1:2): image is required\nsecond line"
    )
    assert info.value.command == "install" and info.value.returncode == 1
    assert helm.stats.failures == {"install": 1}
    helm.close()


async def test_at_most_max_concurrent_processes(fake_helm: tuple[Path, Path], tmp_path: Path) -> None:
    binary, log = fake_helm
    helm = Helm(binary, kubeconfig=tmp_path / "kc", max_concurrent=2)
    started = time.monotonic()
    await asyncio.gather(*(helm.install(f"r{i}", "ns", "/c", {"sleep": 0.3}) for i in range(6)))
    assert time.monotonic() - started >= 0.85  # three waves of two
    events = [json.loads(line) for line in log.read_text().splitlines()]
    timeline = sorted(
        [(e["start"], 1) for e in events if "start" in e] + [(e["end"], -1) for e in events if "end" in e]
    )
    running = peak = 0
    for _, delta in timeline:
        running += delta
        peak = max(peak, running)
    assert peak <= 2
    helm.close()


async def test_the_event_loop_keeps_running_during_a_helm_call(
    fake_helm: tuple[Path, Path], tmp_path: Path
) -> None:
    binary, _ = fake_helm
    helm = Helm(binary, kubeconfig=tmp_path / "kc")
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    await helm.install("web", "ns", "/c", {"sleep": 0.3})
    task.cancel()
    assert ticks >= 10
    helm.close()


async def test_timeout_terminates_the_process(fake_helm: tuple[Path, Path], tmp_path: Path) -> None:
    binary, _ = fake_helm
    helm = Helm(binary, kubeconfig=tmp_path / "kc", timeout=0.3)
    with pytest.raises(HelmError, match="timed out"):
        await helm.install("web", "ns", "/c", {"sleep": 30})
    helm.close()


async def test_cancellation_terminates_the_process(fake_helm: tuple[Path, Path], tmp_path: Path) -> None:
    binary, log = fake_helm
    helm = Helm(binary, kubeconfig=tmp_path / "kc")
    task = asyncio.create_task(helm.install("web", "ns", "/c", {"sleep": 30}))
    await asyncio.sleep(0.5)
    task.cancel()
    started = time.monotonic()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 5
    assert not any("end" in line for line in log.read_text().splitlines())
    helm.close()


def test_find_helm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    binary = tmp_path / "helm"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    assert find_helm(binary) == binary
    with pytest.raises(HelmNotFound, match="does not exist"):
        find_helm(tmp_path / "nope")
    monkeypatch.setenv("KUBEOP_HELM", str(binary))
    assert find_helm() == binary
    monkeypatch.setenv("KUBEOP_HELM", str(tmp_path / "nope"))
    with pytest.raises(HelmNotFound, match="KUBEOP_HELM"):
        find_helm()
    monkeypatch.delenv("KUBEOP_HELM")
    monkeypatch.setenv("KUBEOP_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_helm() == binary  # on PATH
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(HelmNotFound, match="kubeop cluster build --helm"):
        find_helm()


def test_helm_needs_credentials(fake_helm: tuple[Path, Path]) -> None:
    with pytest.raises(ValueError, match="kubeconfig"):
        Helm(fake_helm[0])


def test_kubeconfig_from_client_config(tmp_path: Path) -> None:
    config = ClientConfig(
        server="https://127.0.0.1:6443",
        namespace="team",
        ca_data=b"CA",
        client_cert_data=b"CERT",
        client_key_file="/keys/k.pem",
        token_file="/var/run/token",
        tls_server_name="kubernetes",
        exec=ExecConfig(command="/bin/creds", args=("get",), env={"A": "1"}),
    )
    path = tmp_path / "kc"
    write_kubeconfig(config, path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    doc = yaml.safe_load(path.read_text())
    cluster = doc["clusters"][0]["cluster"]
    user = doc["users"][0]["user"]
    assert cluster == {
        "server": "https://127.0.0.1:6443",
        "certificate-authority-data": "Q0E=",
        "tls-server-name": "kubernetes",
    }
    assert user["client-certificate-data"] == "Q0VSVA==" and user["client-key"] == "/keys/k.pem"
    assert user["tokenFile"] == "/var/run/token"
    assert user["exec"]["command"] == "/bin/creds" and user["exec"]["env"] == [{"name": "A", "value": "1"}]
    assert user["exec"]["interactiveMode"] == "Never"
    assert doc["contexts"][0]["context"]["namespace"] == "team"
    assert doc["current-context"] == "operator"


def test_error_text() -> None:
    assert _error_text("WARNING: x\nError: UPGRADE FAILED: boom\n") == "UPGRADE FAILED: boom"
    assert _error_text("WARNING: x\nsomething odd\n") == "something odd"
    assert _error_text("") == "helm failed without a message"
    assert HelmError("uninstall", "uninstall: Release not loaded: web: release: not found", 1).not_found


async def test_release_labels_go_to_helm_as_one_labels_flag(
    fake_helm: tuple[Path, Path], tmp_path: Path
) -> None:
    binary, log = fake_helm
    helm = Helm(binary, kubeconfig=tmp_path / "kc")
    labels = {"helm.kubeop.dev/owner-uid": "0b5c-11", "helm.kubeop.dev/owner-kind": "Php"}
    await helm.install("web", "ns", "/c", {}, labels=labels)
    await helm.upgrade("web", "ns", "/c", {}, labels=labels)
    await helm.upgrade("web", "ns", "/c", {}, dry_run=True)
    install, upgrade, dry_run = (c["args"] for c in calls(log))
    flag = ["--labels", "helm.kubeop.dev/owner-kind=Php,helm.kubeop.dev/owner-uid=0b5c-11"]
    for args in (install, upgrade):
        i = args.index("--labels")
        assert args[i : i + 2] == flag
    assert "--labels" not in dry_run
    # Helm splits the flag on "," and "=": a value holding either is refused, not passed on.
    for bad in ({"k": "a,b=c"}, {"k=x": "v"}, {"k": "v\n"}, {"": "v"}):
        with pytest.raises(ValueError, match="cannot be passed to helm --labels"):
            await helm.install("web", "ns", "/c", {}, labels=bad)
    assert len(calls(log)) == 3
