"""Reading YAML that someone else wrote (a chart's values.yaml, a PROJECT file, a kustomization):
``yaml.safe_load`` with aliases bounded.

PyYAML loads an alias as a reference to its anchored object, so a 300-byte file of nested aliases
(the "billion laughs") loads in microseconds as a small graph of shared lists, and then costs
seconds and gigabytes in whatever walks or dumps it as a tree (kubeop's dumpers write without
aliases). Helm reads aliases, and charts use them (merge keys), so they are not refused outright.
Instead, per document:

* the aliases may add at most :data:`MAX_ALIAS_NODES` nodes, each alias counted as the size of
  the tree it stands for (nested aliases multiply, as they would when expanded);
* an alias may not refer to a node it is inside (a cycle, which no tree can hold);
* nodes may not nest deeper than :data:`MAX_DEPTH`.

Anything else loads as ``yaml.safe_load`` loads it (libyaml parses when available). Refusals
are ``yaml.YAMLError`` (a ``MarkedYAMLError`` whose ``problem_mark`` is the offending line), so
code catching YAML errors already handles them; the caller names the file.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import SafeConstructor
from yaml.error import Mark
from yaml.events import AliasEvent, CollectionStartEvent, Event, ScalarEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

__all__ = ["MAX_ALIAS_NODES", "MAX_DEPTH", "load_yaml", "load_yaml_all"]

#: How many nodes a document's aliases may add, counted as the trees they expand to.
MAX_ALIAS_NODES = 100_000
#: How deep nodes may nest (the pure-Python composer and constructor recurse per level).
MAX_DEPTH = 200


class _BoundedComposer(Composer):
    """PyYAML's composer, counting what each alias stands for and refusing cycles and deep nesting."""

    _added: int
    _sizes: dict[int, int]
    _open: set[str]
    _depth: int
    peek_event: Callable[[], Event]  # the parser's

    def compose_document(self) -> Node | None:
        self._added, self._sizes, self._open, self._depth = 0, {}, set(), 0
        node: Node | None = super().compose_document()
        self._sizes = {}  # ids of nodes that may be freed now
        return node

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()
        if isinstance(event, AliasEvent):
            self._count_alias(event)
            node: Node | None = super().compose_node(parent, index)
            return node
        anchor = event.anchor if isinstance(event, ScalarEvent | CollectionStartEvent) else None
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise ComposerError(
                None,
                None,
                f"nodes nest deeper than {MAX_DEPTH} levels; flatten the document",
                cast(Mark, event.start_mark),
            )
        if anchor is not None:
            self._open.add(anchor)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
            if anchor is not None:
                self._open.discard(anchor)
        return node

    def _count_alias(self, event: AliasEvent) -> None:
        anchor = event.anchor
        if anchor in self._open:
            raise ComposerError(
                None,
                None,
                f"the alias *{anchor} refers to a node it is inside (a cycle); write the value out instead",
                cast(Mark, event.start_mark),
            )
        target = self.anchors.get(anchor)
        if target is None:
            return  # PyYAML's "found undefined alias"
        self._added += self._size(target)
        if self._added > MAX_ALIAS_NODES:
            raise ComposerError(
                None,
                None,
                f"its aliases expand to more than {MAX_ALIAS_NODES:,} nodes (here *{anchor}), as a YAML "
                "'billion laughs' does; write the values out instead of aliasing them",
                cast(Mark, event.start_mark),
            )

    def _size(self, root: Node) -> int:
        """The number of nodes ``root`` stands for as a tree (memoized: linear in the graph)."""
        sizes = self._sizes
        stack: list[tuple[Node, bool]] = [(root, False)]
        while stack:
            node, children_done = stack.pop()
            if id(node) in sizes:
                continue
            if isinstance(node, ScalarNode):
                sizes[id(node)] = 1
                continue
            children = _children(node)
            if children_done:
                sizes[id(node)] = 1 + sum(sizes[id(c)] for c in children)
                continue
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
        return sizes[id(root)]


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _loader_class() -> type[Any]:
    """The composer above on libyaml's parser where PyYAML has it (3x faster), else on PyYAML's own."""
    try:
        from yaml.cyaml import CParser  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover - PyYAML built without libyaml

        class _PureLoader(
            _BoundedComposer,
            yaml.reader.Reader,
            yaml.scanner.Scanner,
            yaml.parser.Parser,
            SafeConstructor,
            Resolver,
        ):
            def __init__(self, stream: str) -> None:
                yaml.reader.Reader.__init__(self, stream)
                yaml.scanner.Scanner.__init__(self)
                yaml.parser.Parser.__init__(self)
                Composer.__init__(self)
                SafeConstructor.__init__(self)
                Resolver.__init__(self)

        return _PureLoader

    class _FastLoader(_BoundedComposer, CParser, SafeConstructor, Resolver):
        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

    return _FastLoader


_Loader = _loader_class()


def load_yaml(text: str) -> Any:
    """The one document of ``text``, as ``yaml.safe_load`` reads it, aliases bounded (see the module)."""
    return yaml.load(text, Loader=_Loader)


def load_yaml_all(text: str) -> list[Any]:
    """Every document of ``text``, as ``yaml.safe_load_all`` reads them, aliases bounded per document."""
    return list(yaml.load_all(text, Loader=_Loader))
