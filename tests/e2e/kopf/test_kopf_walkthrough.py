"""kopf's documentation walkthrough (the EphemeralVolumeClaim operator) as a docs test on kubeop.kopf.

The walkthrough's pages (``docs/walkthrough/*.rst`` of kopf 1.45.2's sdist, fetched at test time and
pinned by sha256: :mod:`.sdist`; never kept in the repo) are read for their code blocks: the CRD
(resources.rst), the PVC template and the EVC object (creation.rst), and the operator: the creation
handler with ``kopf.adopt`` (deletion.rst), the update handler (updates.rst) and the relabelling
handler (diffs.rst), first its old/new version, then its final diff version, as the pages evolve
it. Only ``import kopf`` is changed. The operator runs as ``kopf run ephemeral.py`` does
(``python -m kubeop.kopf run``) against the control plane, and the test does what the pages tell
the reader to do (their ``kubectl`` patch and label commands are read from the pages too) and
checks what they say happens:

- creating the EVC creates a PVC of its name and size from the template (creation.rst), and the
  creation handler's result is in the EVC's ``status.create_fn`` (updates.rst);
- an EVC without a size gets no PVC: the handler fails permanently (creation.rst's code);
- the PVC is the EVC's child: its owner reference (deletion.rst, ``kopf.adopt``);
- changing the EVC's size resizes the PVC (updates.rst);
- labelling the EVC labels the PVC; the PVC's own labels stay (diffs.rst, old/new version);
- with the diff version (the operator restarted with it, as a reader would), removing a label
  from the EVC removes it from the PVC (diffs.rst);
- deleting the EVC deletes the PVC (deletion.rst: Kubernetes' garbage collector, by the owner
  reference ``kopf.adopt`` set).

The diff version runs only once the EVC has labels: diffs.rst's handler takes ``field[0]`` of each
diff item, and an EVC getting its first labels is one item at the field's root (an empty path),
where the handler fails under kopf as under kubeop.kopf.

The handlers use the ``kubernetes`` library's default client without loading a configuration, as
under kopf. What a cluster's storage gives is made by the test: the StorageClass ``standard`` (the
template names it; the full control plane's default class) allows expansion while the test runs
(the API server resizes claims of such classes only), and a PersistentVolume is reserved for the
claim, which kube-controller-manager binds it to (the API server resizes bound claims only).
"""

from __future__ import annotations

import re
import tarfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeop.testing import ControlPlane
from tests.e2e.kopf.sdist import KOPF_VERSION, kopf_sdist, rewrite_imports
from tests.e2e.kopf.test_kopf_examples import Operator

pytestmark = [pytest.mark.controlplane, pytest.mark.full]  # kube-controller-manager binds and collects

PAGES = f"kopf-{KOPF_VERSION}/docs/walkthrough/"
# ``.. code-block:: lang``, its ``:option: value`` lines, a blank line, then the indented body.
BLOCK = re.compile(r"^\.\. code-block:: *(\w+)\n((?:[ ]{4}:[^\n]*\n)*)\n((?:(?:[ ]{4}[^\n]*)?\n)+)", re.M)
STORAGE_CLASSES = "/apis/storage.k8s.io/v1/storageclasses"


def pages() -> dict[str, str]:
    """The walkthrough's pages by file name, from the pinned sdist."""
    out: dict[str, str] = {}
    with tarfile.open(kopf_sdist()) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.startswith(PAGES) and member.name.endswith(".rst"):
                data = tar.extractfile(member)
                assert data is not None
                out[member.name.removeprefix(PAGES)] = data.read().decode()
    return out


def blocks(page: str) -> list[tuple[str, dict[str, str], str]]:
    """The page's code blocks: (language, options, dedented body)."""
    found = []
    for m in BLOCK.finditer(page):
        options = dict(
            (k, v.strip()) for k, _, v in (line.strip()[1:].partition(":") for line in m[2].splitlines())
        )
        found.append((m[1], options, textwrap.dedent(m[3]).strip("\n") + "\n"))
    return found


def block(page: str, test: Callable[[str, dict[str, str], str], bool], what: str) -> str:
    found = [b for lang, opts, b in blocks(page) if test(lang, opts, b)]
    assert len(found) == 1, f"the walkthrough has {len(found)} blocks of {what}, expected one"
    return found[0]


def named(page: str, name: str) -> str:
    return block(page, lambda _, opts, __: opts.get("name") == name, f"block named {name!r}")


def command(page: str, pattern: str) -> re.Match[str]:
    found = re.search(pattern, page)
    assert found is not None, f"the walkthrough has no command like {pattern!r}"
    return found


def wait(what: str, fn: Callable[[], Any], op: Operator, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got:
            return got
        if op.popen.poll() is not None:
            raise AssertionError(f"the operator exited ({op.popen.returncode}):\n{op.output[-4000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout:.0f} s; last {got!r}:\n{op.output[-4000:]}")
        time.sleep(0.1)


def test_kopf_walkthrough_operator_runs_on_kubeop(
    control_plane: ControlPlane, namespace: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    docs = pages()
    crd = yaml.safe_load(named(docs["resources.rst"], "crd-yaml"))
    template = named(docs["creation.rst"], "pvc")
    evc = yaml.safe_load(named(docs["creation.rst"], "evc"))

    def operator(relabel: str) -> str:
        source, changed = rewrite_imports(
            "\n\n".join(
                [
                    named(docs["deletion.rst"], "adopting"),  # the final creation handler
                    block(
                        docs["updates.rst"],
                        lambda lang, _, b: lang == "python" and "on.update" in b,
                        "the update handler",
                    ),
                    named(docs["diffs.rst"], relabel),
                ]
            )
        )
        assert changed == 2, "the creation and the update blocks each import kopf"
        return source

    (tmp_path / "ephemeral.py").write_text(operator("with-new"))
    (tmp_path / "pvc.yaml").write_text(template)
    resize = command(docs["updates.rst"], r"kubectl patch evc (\S+) --type merge -p '(.+)'")
    relabel = command(docs["diffs.rst"], r"kubectl label evc (\S+) ((?:\S+=\S+ ?)+)")
    name = evc["metadata"]["name"]
    assert resize[1] == relabel[1] == name
    labels = dict(pair.split("=", 1) for pair in relabel[2].split())

    api = control_plane.api
    control_plane.install_crds([crd])
    storage_class = yaml.safe_load(template.format(name="x", size="1G"))["metadata"]["annotations"][
        "volume.beta.kubernetes.io/storage-class"
    ]
    merge = "application/merge-patch+json"
    if api.ok(f"{STORAGE_CLASSES}/{storage_class}"):  # the full control plane's default class
        expansion = api.call("GET", f"{STORAGE_CLASSES}/{storage_class}").get("allowVolumeExpansion")
        api.call("PATCH", f"{STORAGE_CLASSES}/{storage_class}", {"allowVolumeExpansion": True}, merge)
    else:
        expansion = None
        api.call(
            "POST",
            STORAGE_CLASSES,
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": storage_class},
                "provisioner": "walkthrough.kubeop.dev/none",
                "allowVolumeExpansion": True,
            },
        )
    request.addfinalizer(
        lambda: api.call(
            "PATCH", f"{STORAGE_CLASSES}/{storage_class}", {"allowVolumeExpansion": expansion}, merge
        )
    )
    volume = f"walkthrough-{namespace}"[:63]
    request.addfinalizer(lambda: api.call("DELETE", f"/api/v1/persistentvolumes/{volume}"))
    api.call(
        "POST",
        "/api/v1/persistentvolumes",
        {
            "metadata": {"name": volume},
            "spec": {
                "storageClassName": storage_class,
                "capacity": {"storage": "10Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "hostPath": {"path": f"/tmp/{volume}"},
                "claimRef": {"namespace": namespace, "name": evc["metadata"]["name"]},
            },
        },
    )
    evcs = f"/apis/{crd['spec']['group']}/v1/namespaces/{namespace}/{crd['spec']['names']['plural']}"
    pvcs = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"

    def pvc(pvc_name: str = name) -> dict[str, Any] | None:
        return api.call("GET", f"{pvcs}/{pvc_name}") if api.ok(f"{pvcs}/{pvc_name}") else None

    op = Operator(control_plane, tmp_path / "ephemeral.py", namespace)
    try:
        sizeless = {**evc, "metadata": {"name": "no-size"}}
        sizeless.pop("spec", None)
        api.call("POST", evcs, sizeless)
        created = api.call("POST", evcs, evc)

        # creation.rst: the PVC of the EVC's name and size, from the template
        child = wait("PVC", pvc, op)
        assert child["spec"]["resources"]["requests"]["storage"] == evc["spec"]["size"]
        assert child["spec"]["accessModes"] == ["ReadWriteOnce"]
        assert child["metadata"]["annotations"]["volume.beta.kubernetes.io/storage-class"] == storage_class
        # updates.rst: the creation handler's result in the EVC's status
        status = wait(
            "status.create_fn",
            lambda: api.call("GET", f"{evcs}/{name}").get("status", {}).get("create_fn"),
            op,
        )
        assert status == {"pvc-name": name}
        # deletion.rst: kopf.adopt made the PVC the EVC's child
        (owner,) = child["metadata"]["ownerReferences"]
        assert owner == {
            "apiVersion": evc["apiVersion"],
            "kind": evc["kind"],
            "name": name,
            "uid": created["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        # creation.rst's code: no size, no PVC (a permanent error)
        wait("the permanent error", lambda: "Size must be set" in op.output, op)
        assert pvc("no-size") is None

        # updates.rst: the EVC's new size resizes the PVC (once bound to its volume)
        wait("the PVC bound", lambda: (pvc() or {}).get("status", {}).get("phase") == "Bound", op, 60)
        new_size = yaml.safe_load(resize[2])
        api.call("PATCH", f"{evcs}/{name}", new_size, "application/merge-patch+json")
        size = new_size["spec"]["size"]
        wait(f"PVC of {size}", lambda: (pvc() or {})["spec"]["resources"]["requests"]["storage"] == size, op)

        # diffs.rst (old/new): the EVC's labels go to the PVC, the PVC's own labels stay
        api.call("PATCH", f"{pvcs}/{name}", {"metadata": {"labels": {"manual": "yes"}}}, merge)
        api.call("PATCH", f"{evcs}/{name}", {"metadata": {"labels": labels}}, merge)
        expected = {**labels, "manual": "yes"}
        wait(f"PVC labels {expected}", lambda: (pvc() or {})["metadata"].get("labels") == expected, op)
    finally:
        code = op.stop()
    assert code == 0, op.output[-4000:]

    # diffs.rst (diff): the operator restarted with the final handler; a removed label goes
    (tmp_path / "ephemeral.py").write_text(operator("with-diff"))
    op = Operator(control_plane, tmp_path / "ephemeral.py", namespace)
    try:
        gone, *_ = sorted(labels)
        api.call("PATCH", f"{evcs}/{name}", {"metadata": {"labels": {gone: None}}}, merge)
        expected.pop(gone)
        wait(f"PVC labels {expected}", lambda: (pvc() or {})["metadata"].get("labels") == expected, op)

        # deletion.rst: the operator lets the EVCs go; the garbage collector deletes the PVC
        for evc_name in (name, "no-size"):
            api.call("DELETE", f"{evcs}/{evc_name}")
        wait("the EVCs deleted", lambda: not api.ok(f"{evcs}/{name}") and not api.ok(f"{evcs}/no-size"), op)
        wait("the PVC deleted with its owner", lambda: pvc() is None, op, 60)
    finally:
        code = op.stop()
    assert code == 0, op.output[-4000:]
