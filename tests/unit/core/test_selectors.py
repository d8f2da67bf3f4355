"""Label and field selectors: parse, print, match, and the errors the server would give."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubeop.core import ApiResource, RequestBuilder, Selectors
from kubeop.core.selectors import FieldSelector, LabelSelector, Operator, Requirement, SelectorError


@pytest.mark.parametrize(
    ("text", "printed"),
    [
        ("", ""),
        ("app=web", "app=web"),
        ("app==web", "app=web"),
        ("app!=web", "app!=web"),
        ("tier in (b, a)", "tier in (a,b)"),
        ("tier notin (a)", "tier notin (a)"),
        ("legacy", "legacy"),
        ("!legacy", "!legacy"),
        ("replicas>3", "replicas>3"),
        ("replicas<3", "replicas<3"),
        ("z=1,a=2", "a=2,z=1"),
        ("x in (foo,,baz),y,z notin ()", "x in (,baz,foo),y,z notin ()"),
        ("example.com/app=web", "example.com/app=web"),
        ("a=", "a="),
        ("  a = b ,  c  ", "a=b,c"),
        ("x in (in)", "x in (in)"),
    ],
)
def test_parse_and_print(text: str, printed: str) -> None:
    assert str(LabelSelector.parse(text)) == printed


@pytest.mark.parametrize(
    "text",
    [
        "a=b=c",
        "a in b",
        "a in (b",
        ",a",
        "a,",
        "!a=b",
        "a>b",
        "a=b c",
        "-bad=x",
        "a=-bad",
        "Example.com/a=b",
        "/a=b",
        "a/=b",
        "x" * 64 + "=y",
        "a=" + "v" * 64,
        "a notin",
        "=b",
    ],
)
def test_rejects_bad_input(text: str) -> None:
    with pytest.raises(SelectorError) as info:
        LabelSelector.parse(text)
    assert repr(text)[:20] in str(info.value)  # the message quotes the selector


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("", {}, True),
        ("app=web", {"app": "web"}, True),
        ("app=web", {"app": "db"}, False),
        ("app=web", {}, False),
        ("app!=web", {}, True),
        ("app!=web", {"app": "web"}, False),
        ("tier in (a,b)", {"tier": "b"}, True),
        ("tier in (a,b)", {}, False),
        ("tier notin (a,b)", {}, True),
        ("tier notin (a,b)", {"tier": "a"}, False),
        ("legacy", {"legacy": ""}, True),
        ("!legacy", {"legacy": ""}, False),
        ("n>3", {"n": "4"}, True),
        ("n>3", {"n": "3"}, False),
        ("n<3", {"n": "x"}, False),
        ("n<3", {}, False),
        ("app=web,!legacy", {"app": "web"}, True),
        ("app=web,!legacy", {"app": "web", "legacy": "1"}, False),
    ],
)
def test_matches(text: str, labels: dict[str, str], expected: bool) -> None:
    assert LabelSelector.parse(text).matches(labels) is expected


def test_from_dict_and_back() -> None:
    spec = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["b", "a"]},
            {"key": "legacy", "operator": "DoesNotExist"},
        ],
    }
    sel = LabelSelector.from_dict(spec)
    assert str(sel) == "app=web,!legacy,tier in (a,b)"
    assert LabelSelector.from_dict(sel.to_dict()) == sel
    assert LabelSelector.from_dict(None).matches({"x": "y"})
    assert LabelSelector.from_dict({}).is_empty


def test_from_dict_errors_name_the_field() -> None:
    with pytest.raises(SelectorError, match=r"matchExpressions\[0\]\.operator"):
        LabelSelector.from_dict({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]})
    with pytest.raises(SelectorError, match="needs at least one value"):
        LabelSelector.from_dict({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]})
    with pytest.raises(SelectorError, match="takes no values"):
        Requirement.create("a", Operator.EXISTS, ["x"])


def test_gt_has_no_dict_form() -> None:
    with pytest.raises(SelectorError):
        LabelSelector.parse("n>1").to_dict()


def test_and_combines() -> None:
    sel = LabelSelector.parse("b=1") & LabelSelector.from_labels({"a": "2"})
    assert str(sel) == "a=2,b=1"


_label = st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,10}[a-z0-9])?", fullmatch=True)


@given(st.dictionaries(_label, _label, max_size=5), st.dictionaries(_label, _label, max_size=5))
def test_print_parse_roundtrip_and_match_agree(selector: dict[str, str], labels: dict[str, str]) -> None:
    sel = LabelSelector.from_labels(selector)
    again = LabelSelector.parse(str(sel))
    assert again == sel
    assert again.matches(labels) == all(labels.get(k) == v for k, v in selector.items())


# -- field selectors ----------------------------------------------------------------------------


def test_field_selector_parse_print_match() -> None:
    sel = FieldSelector.parse("status.phase!=Running,metadata.name==web")
    assert str(sel) == "metadata.name=web,status.phase!=Running"
    assert sel.matches({"metadata.name": "web", "status.phase": "Pending"})
    assert not sel.matches({"metadata.name": "web", "status.phase": "Running"})
    obj = {"metadata": {"name": "web"}, "status": {"phase": "Pending"}}
    assert sel.matches_object(obj)


def test_field_selector_escaping_roundtrip() -> None:
    sel = FieldSelector.from_fields({"metadata.name": "a,b=c\\d"})
    text = str(sel)
    assert text == "metadata.name=a\\,b\\=c\\\\d"
    assert FieldSelector.parse(text) == sel


@pytest.mark.parametrize("text", ["metadata.name", "=x", "a=b=c", "a=x\\y", "a=x\\"])
def test_field_selector_rejects(text: str) -> None:
    with pytest.raises(SelectorError):
        FieldSelector.parse(text)


def test_selectors_merge_takes_each_kind_given_once_and_needs_both_when_given_twice() -> None:
    both = Selectors.of({"app": "web"}, "status.phase=Running")
    assert Selectors.merge(None, {"app": "web"}, "status.phase=Running") == both
    assert Selectors.merge(both) is both
    assert Selectors.merge(Selectors(labels="app=web"), None, "status.phase=Running") == both
    assert Selectors.merge(both, "tier=db", {"metadata.name": "a"}) == Selectors(
        "app=web,tier=db", "status.phase=Running,metadata.name=a"
    )


def test_selectors_of_selection_names_the_call_on_an_unknown_keyword() -> None:
    assert Selectors.of_selection({}, call="Client.list") == Selectors()
    assert Selectors.of_selection(
        {"selectors": Selectors(labels="app=web"), "field_selector": "a=b"}, call="Client.list"
    ) == Selectors("app=web", "a=b")
    with pytest.raises(TypeError, match=r"Client\.watch\(\) got an unexpected keyword argument 'label'"):
        Selectors.of_selection({"label": "a=b"}, call="Client.watch")  # type: ignore[typeddict-unknown-key]


def test_request_builder_takes_selectors_beside_the_two_keywords() -> None:
    pods = RequestBuilder(ApiResource("", "v1", "pods", kind="Pod"), "default")
    selectors = Selectors.of({"app": "web"}, "status.phase=Running")
    kw = {"label_selector": {"app": "web"}, "field_selector": "status.phase=Running"}
    assert pods.list(selectors=selectors) == pods.list(**kw)  # type: ignore[arg-type]
    assert pods.watch(selectors=selectors, name="a") == pods.watch(name="a", **kw)  # type: ignore[arg-type]
    assert pods.delete_collection(selectors=selectors) == pods.delete_collection(**kw)  # type: ignore[arg-type]
    assert pods.list(selectors=Selectors(labels="app=web"), label_selector="tier=db").query == (
        ("labelSelector", "app=web,tier=db"),
    )
