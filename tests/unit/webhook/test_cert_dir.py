"""The cert dir: a private one of this user's by default, and only regular files read from any.

Another local user must not be able to choose the webhook's CA or read its key by creating the
default directory first, nor hang the operator with a FIFO where a PEM file should be. A Secret
mounted by kubelet (``tls.crt -> ..data/tls.crt``, ``..data -> ..<timestamp>``) stays readable.
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubeop.manager import Serving
from kubeop.webhook.certs import (
    CertPathError,
    checked_cert_path,
    default_cert_dir,
    local_certificates,
    read_cert_file,
)

OTHER_UID = 12345  # another local user (the tests run as root in the sandbox, which may chown)


@pytest.fixture
def temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temp dir of the test's own, as ``tempfile.gettempdir()``, and no XDG_RUNTIME_DIR."""
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp: everyone may write, the sticky bit keeps entries their owner's
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    yield shared


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _bounded(call: Callable[[], Any], fifo: Path, seconds: float = 5.0) -> Any:
    """``call()`` in a thread, at most ``seconds``; a reader stuck on ``fifo`` is released (by
    opening it for writing) so the test fails instead of hanging."""
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["value"] = call()
        except BaseException as exc:
            result["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # the stuck reader sees EOF
        os.close(fd)
        thread.join(seconds)
        pytest.fail(f"blocked on the FIFO {fifo} for {seconds} s")
    if "error" in result:
        raise result["error"]
    return result.get("value")


# -- the default directory -------------------------------------------------------------------------


async def test_without_a_cert_dir_the_manager_serves_from_a_private_directory(temp: Path) -> None:
    from examples.crontab.webhooks.crontab_v1beta1 import validate

    from kubeop.client import Client
    from kubeop.client.config import ClientConfig
    from kubeop.manager import Manager
    from kubeop.webhook import Webhooks

    client = Client(ClientConfig(server="https://127.0.0.1:1"))  # never called: no controllers
    manager = Manager(
        client,
        name="webhooks-only",
        webhooks=Webhooks([validate]),
        serving=Serving(metrics_address=None, health_address=None, webhook_address="127.0.0.1:0"),
    )
    stop = asyncio.Event()
    task = asyncio.ensure_future(manager.start(stop))
    try:
        for _ in range(500):
            if manager.webhook_server is not None and manager.webhook_server.ready():
                break
            await asyncio.sleep(0.01)
        assert manager.webhook_server is not None
        directory = manager.webhook_server.cert_dir
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
        await client.close()
    assert directory == temp / f"kubeop-{os.geteuid()}" / "webhook-certs"
    for level in (directory, directory.parent):
        assert os.lstat(level).st_uid == os.geteuid() and _mode(level) == 0o700
    assert _mode(directory / "tls.key") == 0o600 and _mode(directory / "ca.key") == 0o600


def test_the_default_directory_is_made_private_and_reused(temp: Path) -> None:
    first = default_cert_dir()
    assert first == temp / f"kubeop-{os.geteuid()}" / "webhook-certs"
    assert _mode(first) == _mode(first.parent) == 0o700
    certs = local_certificates()
    assert certs.directory == first and default_cert_dir() == first
    assert local_certificates().ca_pem == certs.ca_pem  # reused, not re-made


def test_a_default_directory_another_user_made_first_is_refused(temp: Path) -> None:
    planted = temp / f"kubeop-{os.geteuid()}"
    planted.mkdir(0o700)
    os.chown(planted, OTHER_UID, OTHER_UID)
    refused = f"{planted}: it belongs to uid {OTHER_UID}, not to this user"
    with pytest.raises(CertPathError, match=re.escape(refused)):
        default_cert_dir()
    with pytest.raises(CertPathError, match=r"Remove it .* or give a cert dir of your own"):
        local_certificates()
    assert list(planted.iterdir()) == []  # nothing written into it


def test_a_default_directory_others_may_use_is_refused(temp: Path) -> None:
    base = temp / f"kubeop-{os.geteuid()}"
    base.mkdir()
    base.chmod(0o777)
    with pytest.raises(CertPathError, match=re.escape(f"{base}: its mode is 777: others may use it")):
        default_cert_dir()
    base.chmod(0o700)
    inner = base / "webhook-certs"
    inner.mkdir()
    inner.chmod(0o755)
    with pytest.raises(CertPathError, match=re.escape(f"{inner}: its mode is 755")):
        default_cert_dir()
    os.chown(inner, OTHER_UID, 0)
    inner.chmod(0o700)
    with pytest.raises(CertPathError, match=f"it belongs to uid {OTHER_UID}"):
        default_cert_dir()


def test_a_symlink_in_place_of_the_default_directory_is_refused(temp: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(0o700)
    (temp / f"kubeop-{os.geteuid()}").symlink_to(elsewhere)
    with pytest.raises(CertPathError, match="is not a directory of its own"):
        default_cert_dir()
    assert list(elsewhere.iterdir()) == []


def test_a_temp_dir_others_may_write_without_the_sticky_bit_is_refused(temp: Path) -> None:
    temp.chmod(0o777)
    with pytest.raises(CertPathError, match=r"writable by other users and not sticky .* set TMPDIR"):
        default_cert_dir()


def test_the_users_runtime_dir_is_preferred_when_it_is_private(
    temp: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = tmp_path / "run-user"
    runtime.mkdir(0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    assert default_cert_dir() == runtime / "kubeop" / "webhook-certs"
    runtime.chmod(0o777)  # not private: not used
    assert default_cert_dir() == temp / f"kubeop-{os.geteuid()}" / "webhook-certs"
    monkeypatch.setenv("XDG_RUNTIME_DIR", "relative/dir")
    assert default_cert_dir().is_relative_to(temp)


def test_no_symlink_at_all_is_followed_in_the_default_directory(temp: Path, tmp_path: Path) -> None:
    directory = local_certificates().directory
    inside = directory / "copy.crt"
    inside.write_bytes((directory / "tls.crt").read_bytes())
    (directory / "tls.crt").unlink()
    (directory / "tls.crt").symlink_to("copy.crt")  # even one inside
    with pytest.raises(CertPathError, match=re.escape("tls.crt is a symlink, not followed")):
        local_certificates()


# -- the files read -------------------------------------------------------------------------------


def test_a_fifo_planted_as_tls_crt_does_not_block(tmp_path: Path) -> None:
    directory = tmp_path / "certs"
    local_certificates(directory)
    (directory / "tls.crt").unlink()
    os.mkfifo(directory / "tls.crt")
    with pytest.raises(CertPathError, match=re.escape("tls.crt is not a regular file")):
        _bounded(lambda: local_certificates(directory), directory / "tls.crt")
    with pytest.raises(CertPathError, match="not a regular file"):
        _bounded(lambda: read_cert_file(directory, "tls.crt"), directory / "tls.crt")


def test_a_fifo_in_the_default_directory_does_not_block(temp: Path) -> None:
    directory = default_cert_dir()
    os.mkfifo(directory / "ca.crt")
    with pytest.raises(CertPathError, match=re.escape("ca.crt is not a regular file")):
        _bounded(local_certificates, directory / "ca.crt")


def test_the_rotator_replaces_a_fifo_where_it_writes_without_blocking(tmp_path: Path) -> None:
    from kubeop.webhook.rotator import _write

    for name in ("tls.key", "tls.crt"):
        os.mkfifo(tmp_path / name)
        _bounded(functools.partial(_write, tmp_path / name, b"pem", 0o600), tmp_path / name)
        assert stat.S_ISREG(os.lstat(tmp_path / name).st_mode)
        assert (tmp_path / name).read_bytes() == b"pem" and _mode(tmp_path / name) == 0o600


def test_the_rotator_replaces_a_symlink_where_it_writes_never_writing_through_it(tmp_path: Path) -> None:
    from kubeop.webhook.rotator import _write

    outside = tmp_path / "outside"
    outside.write_bytes(b"pem")
    outside.chmod(0o644)
    directory = tmp_path / "certs"
    directory.mkdir()
    (directory / "tls.key").symlink_to(outside)
    _write(directory / "tls.key", b"pem", 0o600)  # the same content: still not "kept" through a link
    assert not (directory / "tls.key").is_symlink() and _mode(directory / "tls.key") == 0o600
    assert outside.read_bytes() == b"pem" and _mode(outside) == 0o644  # the target untouched


def test_a_symlink_to_a_file_outside_the_cert_dir_is_refused(tmp_path: Path) -> None:
    planted = local_certificates(tmp_path / "someone-elses")  # a CA and pair made elsewhere
    directory = tmp_path / "certs"
    local_certificates(directory)
    (directory / "ca.crt").unlink()
    (directory / "ca.crt").symlink_to(planted.directory / "ca.crt")
    with pytest.raises(CertPathError, match=r"ca.crt leads to .*someone-elses/ca.crt, outside"):
        local_certificates(directory)
    (directory / "tls.crt").unlink()
    (directory / "tls.crt").symlink_to("../someone-elses/tls.crt")  # relative, through ..
    with pytest.raises(CertPathError, match="outside"):
        read_cert_file(directory, "tls.crt")


def test_a_kubelet_secret_volume_layout_still_loads(tmp_path: Path) -> None:
    """What kubelet's atomic writer makes of a mounted Secret: a timestamped directory holding the
    files, ``..data`` pointing at it, and one symlink per key through ``..data``."""
    made = local_certificates(tmp_path / "made")
    volume = tmp_path / "volume"
    stamp = volume / "..2024_01_02_03_04_05.123456789"
    stamp.mkdir(parents=True)
    for name in ("ca.crt", "tls.crt", "tls.key"):
        (stamp / name).write_bytes((made.directory / name).read_bytes())
    (volume / "..data").symlink_to(stamp.name)
    for name in ("ca.crt", "tls.crt", "tls.key"):
        (volume / name).symlink_to(f"..data/{name}")
    volume.chmod(0o1777)  # kubelet's tmpfs: root's, everyone's: an explicit dir is not owner-checked
    certs = local_certificates(volume)
    assert certs.directory == volume and certs.ca_pem == made.ca_pem  # read, reused, not re-made
    assert all((volume / name).is_symlink() for name in ("ca.crt", "tls.crt", "tls.key"))
    assert read_cert_file(volume, "tls.key") == (made.directory / "tls.key").read_bytes()
    assert checked_cert_path(volume, "tls.crt") == Path(os.path.realpath(stamp / "tls.crt"))


def test_a_directory_or_an_oversized_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "tls.crt").mkdir()
    with pytest.raises(CertPathError, match="not a regular file"):
        read_cert_file(tmp_path, "tls.crt")
    with open(tmp_path / "ca.crt", "wb") as fh:
        fh.truncate(2 << 20)  # sparse: 2 MiB without writing them
    with pytest.raises(CertPathError, match="bytes: a PEM file this large is not a certificate"):
        read_cert_file(tmp_path, "ca.crt")
    with pytest.raises(FileNotFoundError):
        read_cert_file(tmp_path, "tls.key")


def test_the_webhook_server_loads_only_regular_files_from_its_cert_dir(tmp_path: Path) -> None:
    """The server's own certificate loader checks the files as the cert dir's readers do: a FIFO
    planted as tls.key fails the start at once (it blocked the event loop), and a tls.crt that is
    a symlink to a file outside the directory is refused."""
    from kubeop.webhook import Webhooks, WebhookServer

    directory = tmp_path / "certs"
    local_certificates(directory)
    (directory / "tls.key").unlink()
    os.mkfifo(directory / "tls.key")
    server = WebhookServer(Webhooks(), "127.0.0.1:0", cert_dir=directory)
    with pytest.raises(CertPathError, match="not a regular file"):
        _bounded(lambda: asyncio.run(server.start()), directory / "tls.key")

    elsewhere = tmp_path / "elsewhere"
    local_certificates(elsewhere)
    directory = tmp_path / "linked"
    local_certificates(directory)
    (directory / "tls.crt").unlink()
    (directory / "tls.crt").symlink_to(elsewhere / "tls.crt")
    server = WebhookServer(Webhooks(), "127.0.0.1:0", cert_dir=directory)
    with pytest.raises(CertPathError):
        asyncio.run(server.start())
