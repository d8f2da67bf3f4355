"""watches.yaml: loading, defaults, every invalid field named, environment expansion, writing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeop.helm.watches import (
    Watch,
    WatchesError,
    expand_env,
    format_duration,
    load_watches,
    parse_duration,
    parse_watches,
    write_watches,
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    chart = tmp_path / "helm-charts" / "php"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: php\nversion: 0.1.0\n")
    return tmp_path


def entry(**extra: Any) -> dict[str, Any]:
    return {
        "group": "web.example.com",
        "version": "v1",
        "kind": "PhpDeployment",
        "chart": "helm-charts/php",
        **extra,
    }


def load(project: Path, data: Any, env: dict[str, str] | None = None) -> list[Watch]:
    path = project / "watches.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_watches(path, env=env or {})


def error(project: Path, data: Any) -> str:
    with pytest.raises(WatchesError) as info:
        load(project, data)
    return str(info.value)


def test_minimal_entry_gets_operator_sdk_defaults(project: Path) -> None:
    [w] = load(project, [entry()])
    assert (w.group, w.version, w.kind) == ("web.example.com", "v1", "PhpDeployment")
    assert w.chart == project / "helm-charts" / "php"
    assert w.watch_dependent_resources is True
    assert w.override_values == {}
    assert w.selector is None and w.label_selector is None
    assert w.reconcile_period is None and w.max_concurrent_reconciles is None
    assert w.api_version == "web.example.com/v1"


def test_every_field(project: Path) -> None:
    data = [
        entry(
            watchDependentResources=False,
            overrideValues={"image.tag": "$TAG", "replicas": 3, "debug": True},
            selector={
                "matchLabels": {"team": "web"},
                "matchExpressions": [{"key": "tier", "operator": "Exists"}],
            },
            reconcilePeriod="1m30s",
            maxConcurrentReconciles=4,
        )
    ]
    [w] = load(project, data, env={"TAG": "8.3"})
    assert w.watch_dependent_resources is False
    assert w.override_values == {"image.tag": "8.3", "replicas": "3", "debug": "true"}
    assert w.label_selector == "team=web,tier"
    assert w.reconcile_period == 90.0
    assert w.max_concurrent_reconciles == 4


def test_absolute_chart_path_and_null_dependents(project: Path) -> None:
    [w] = load(project, [entry(chart=str(project / "helm-charts" / "php"), watchDependentResources=None)])
    assert w.chart == project / "helm-charts" / "php"
    assert w.watch_dependent_resources is True


def test_empty_file_is_no_watches(project: Path) -> None:
    (project / "watches.yaml").write_text("")
    assert load_watches(project / "watches.yaml") == []


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"group": "x"}, "the top level must be a list"),
        (["nope"], "entry 0 must be a mapping"),
        ([entry(gruop="x")], "gruop: unknown field (did you mean 'group'?)"),
        ([entry(chartDir="x")], "chartDir: unknown field"),
        ([{k: v for k, v in entry().items() if k != "group"}], "group: missing"),
        ([entry(group="web")], "group: 'web' is not a DNS subdomain with a dot"),
        ([entry(group="Web.Example.com")], "group: 'Web.Example.com' is not a DNS subdomain"),
        ([entry(version="1")], "version: '1' is not a Kubernetes version name"),
        ([entry(kind="phpDeployment")], "kind: 'phpDeployment' is not CamelCase"),
        ([entry(kind=3)], "kind: must be a string, got a number 3"),
        ([entry(chart="helm-charts/none")], "chart: 'helm-charts/none' is not a directory"),
        ([entry(chart="helm-charts")], "chart: 'helm-charts' is not a Helm chart"),
        ([entry(watchDependentResources="yes")], "watchDependentResources: must be true or false"),
        ([entry(overrideValues=["a"])], "overrideValues: must be a mapping"),
        ([entry(overrideValues={"a": {"b": 1}})], "overrideValues.a: must be a scalar"),
        ([entry(overrideValues={"a..b": "1"})], "overrideValues.a..b: override key 'a..b' has an empty name"),
        ([entry(overrideValues={"a[x]": "1"})], "list index 'x' is not a number"),
        ([entry(selector="team=web")], "selector: must be a label selector"),
        ([entry(selector={"matchLabel": {}})], "selector.matchLabel: unknown field"),
        (
            [entry(selector={"matchExpressions": [{"key": "a", "operator": "Is"}]})],
            "matchExpressions[0].operator: 'Is' is not In",
        ),
        ([entry(selector={"matchLabels": {"bad key!": "x"}})], "selector:"),
        ([entry(reconcilePeriod="soon")], "reconcilePeriod: 'soon' is not a duration"),
        ([entry(reconcilePeriod="-1m")], "reconcilePeriod: '-1m' is negative"),
        ([entry(maxConcurrentReconciles=0)], "maxConcurrentReconciles: must be a positive integer"),
        ([entry(maxConcurrentReconciles=True)], "maxConcurrentReconciles: must be a positive integer"),
        ([entry(), entry()], "entry 1 (PhpDeployment): duplicate group/version/kind"),
    ],
)
def test_invalid_entries_name_the_field(project: Path, data: Any, expected: str) -> None:
    message = error(project, data)
    assert expected in message
    assert "watches.yaml" in message


def test_messages_name_the_entry_and_its_kind(project: Path) -> None:
    message = error(project, [entry(), entry(kind="Other", version="v0")])
    assert message.endswith(
        "entry 1 (Other): version: 'v0' is not a Kubernetes version name (v1, v1beta1, v2alpha3)"
    )


def test_missing_file_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(WatchesError, match="no such file"):
        load_watches(tmp_path / "watches.yaml")
    (tmp_path / "watches.yaml").write_text("- group: [unclosed\n")
    with pytest.raises(WatchesError, match="not valid YAML") as caught:
        load_watches(tmp_path / "watches.yaml")
    assert "\n" not in str(caught.value) and "line " in str(caught.value)  # one line, saying where


def test_parse_without_chart_check(tmp_path: Path) -> None:
    [w] = parse_watches([entry(chart="later")], base_dir=tmp_path, check_charts=False)
    assert w.chart == tmp_path / "later"


def test_write_then_load_round_trips(project: Path) -> None:
    watches = [
        Watch("web.example.com", "v1", "PhpDeployment", project / "helm-charts" / "php"),
        Watch(
            "web.example.com",
            "v1beta1",
            "PhpDeployment",
            project / "helm-charts" / "php",
            watch_dependent_resources=False,
            override_values={"image.tag": "8.3"},
            selector={"matchLabels": {"team": "web"}},
            reconcile_period=90.0,
            max_concurrent_reconciles=2,
        ),
    ]
    path = project / "watches.yaml"
    write_watches(path, watches)
    text = path.read_text()
    assert "chart: helm-charts/php" in text and "reconcilePeriod: 1m30s" in text
    assert load_watches(path) == watches


def test_write_refuses_duplicates(project: Path) -> None:
    w = Watch("web.example.com", "v1", "PhpDeployment", project / "helm-charts" / "php")
    with pytest.raises(WatchesError, match="duplicate"):
        write_watches(project / "watches.yaml", [w, w])


def test_write_keeps_charts_outside_the_project_absolute(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    other = tmp_path_factory.mktemp("elsewhere")
    w = Watch("web.example.com", "v1", "PhpDeployment", other / "chart")
    assert w.to_dict(project)["chart"] == str(other / "chart")


# -- environment expansion: Go's os.ExpandEnv -----------------------------------------------------

ENV = {"A": "alpha", "B_2": "beta", "1": "one", "EMPTY": ""}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain", "plain"),
        ("$A", "alpha"),
        ("${A}", "alpha"),
        ("x-$A-y", "x-alpha-y"),
        ("$A$B_2", "alphabeta"),
        ("${B_2}x", "betax"),
        ("$Ax", ""),  # the name is "Ax", which is unset
        ("$UNSET", ""),
        ("$EMPTY", ""),
        ("$1", "one"),
        ("${1}", "one"),
        ("$$", ""),  # "$" is a special one-character name, unset here
        ("a$", "a$"),  # a trailing dollar stays
        ("$-x", "x"),  # "-" is a special name
        ("$.x", "$.x"),  # not followed by a name: the dollar stays
        ("${", ""),  # bad syntax: eaten
        ("${}x", "x"),  # bad syntax: eaten
        ("${A", "A"),  # no closing brace: bad syntax, Go eats only the "${"
        ("100%", "100%"),
    ],
)
def test_expand_env_follows_go(text: str, expected: str) -> None:
    assert expand_env(text, ENV) == expected


def test_expand_env_uses_the_process_environment_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBEOP_TEST_VALUE", "from-env")
    assert expand_env("${KUBEOP_TEST_VALUE}") == "from-env"


# -- durations ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0", 0.0), ("30s", 30.0), ("1m", 60.0), ("1m30s", 90.0), ("1h", 3600.0), ("1.5h", 5400.0),
     ("500ms", 0.5), ("2h45m10s", 9910.0), ("100us", 1e-4), (45, 45.0), (2.5, 2.5)],
)  # fmt: skip
def test_parse_duration(text: Any, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "1", "1x", "m", "1m x", True, [1], -3])
def test_parse_duration_rejects(text: Any) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (0.5, "500ms"), (60, "1m0s"), (90, "1m30s"), (3600, "1h0m0s")]
)
def test_format_duration_round_trips(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds


_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, n in zip("abcdefg", "bcdefgh", strict=True)
)


def test_aliases_that_expand_without_bound_are_refused_in_watches_and_a_charts_values(tmp_path: Path) -> None:
    """A "billion laughs" of a few hundred bytes is refused at once, not expanded by the dumpers."""
    from kubeop.helm.crd import HelmChartError, crd_for_chart

    (tmp_path / "watches.yaml").write_text(_LAUGHS)
    with pytest.raises(WatchesError, match="not valid YAML"):
        load_watches(tmp_path / "watches.yaml")
    chart = tmp_path / "chart"
    chart.mkdir()
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: laughs\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text(_LAUGHS)
    (chart / "values.schema.json").write_text('{"type": "object"}')
    with pytest.raises(HelmChartError, match=r"values\.yaml"):
        crd_for_chart(chart, "example.com", "v1", "Laugh")
