"""EtcdStorage's reading of etcd's answers, without an etcd (the storage itself runs against a
real one in tests/e2e/apiserver/test_etcd_storage.py): errors mapped to the Status a client
acts on, values refused unless they are objects this storage wrote, options checked at once."""

from __future__ import annotations

import base64

import pytest

from kubeop.apiserver import EtcdStorage, StatusError
from kubeop.apiserver.etcd import _etcd_error, _int, _object, _prefix_end


def test_etcd_errors_become_the_status_a_client_acts_on() -> None:
    compacted = _etcd_error(
        {"code": 11, "message": "etcdserver: mvcc: required revision has been compacted"}, "/r"
    )
    assert (compacted.code, compacted.reason) == (410, "Expired")
    future = _etcd_error(
        {"code": 11, "message": "etcdserver: mvcc: required revision is a future revision"}, "/r"
    )
    assert future.code == 504
    large = _etcd_error({"code": 3, "message": "etcdserver: request is too large"}, "/v3/kv/txn")
    assert large.code == 413 and "--max-request-bytes" in str(large)
    other = _etcd_error({"code": 14, "message": "etcdserver: leader changed"}, "/v3/kv/txn")
    assert other.code == 500 and "leader changed" in str(other) and "/v3/kv/txn" in str(other)


def test_a_value_is_an_object_with_its_key_revision_or_refused() -> None:
    kv = {"key": base64.b64encode(b"/p/r/ns/a").decode(), "mod_revision": "7"}
    good = {**kv, "value": base64.b64encode(b'{"metadata": {"name": "a"}}').decode()}
    assert _object(good) == {"metadata": {"name": "a", "resourceVersion": "7"}}
    for value in (b"[]", b"not json", b'{"spec": {}}'):
        with pytest.raises(StatusError, match="'/p/r/ns/a' does not hold an object"):
            _object({**kv, "value": base64.b64encode(value).decode()})
    with pytest.raises(StatusError, match="not a non-negative integer"):
        _int("-1", "mod_revision")
    assert _int("12", "count") == 12 and _prefix_end(b"/p/r/") == b"/p/r0"


def test_options_are_checked_when_made() -> None:
    with pytest.raises(ValueError, match="url must be http"):
        EtcdStorage("etcd:2379")
    with pytest.raises(ValueError, match="prefix must start and end with '/'"):
        EtcdStorage("http://127.0.0.1:2379", prefix="widgets")
    with pytest.raises(ValueError, match="history and watch_queue"):
        EtcdStorage("http://127.0.0.1:2379", history=0)
    assert (
        repr(EtcdStorage("http://127.0.0.1:2379/"))
        == "<EtcdStorage http://127.0.0.1:2379/kubeop/apiserver/ at version 0>"
    )
