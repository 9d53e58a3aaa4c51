"""A YAML reader for files a stranger may have written: bounded, strict, and fast to say no.

`read_yaml(text)` is `yaml.safe_load` with these refusals (each a `YAMLRefused` naming the line):

- an alias bomb: anchors and aliases may be used, but the document they expand to may hold at
  most `MAX_NODES` nodes (a billion-laughs file is refused after composing, before anything walks
  the expanded tree), and at most `MAX_ALIASES` aliases;
- nesting deeper than `MAX_DEPTH` (no RecursionError halfway through the parser);
- a key written twice in one mapping (YAML keeps the last one silently; a task author's typo);
- a number that is not finite (`.inf`, `.nan`): no limit, timeout or weight is infinite; an integer
  longer than Python converts.

The pure-Python SafeLoader is used on purpose: task files are small, and its composer is where
aliases and depth can be counted.
"""
from __future__ import annotations

import math

import yaml
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, SequenceNode

MAX_NODES = 100_000  # nodes of the expanded document (a task file has a few hundred)
MAX_ALIASES = 1_000
MAX_DEPTH = 64


class YAMLRefused(ValueError):
    """The YAML is well-formed but refused; `line` (1-based) is where, when known."""

    def __init__(self, problem: str, line: int | None = None):
        super().__init__(problem)
        self.problem, self.line = problem, line


def _line(node_or_mark) -> int | None:
    mark = getattr(node_or_mark, "start_mark", node_or_mark)
    return mark.line + 1 if mark is not None and hasattr(mark, "line") else None


class _BoundedLoader(yaml.SafeLoader):
    def __init__(self, stream):
        super().__init__(stream)
        self._aliases = 0
        self._depth = 0

    def compose_node(self, parent, index):
        if self.check_event(AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise YAMLRefused(f"more than {MAX_ALIASES} aliases", _line(self.peek_event()))
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise YAMLRefused(f"nested more than {MAX_DEPTH} levels deep", _line(self.peek_event()))
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):
        if isinstance(node, MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    if key in seen:
                        raise YAMLRefused(f"duplicate key {key!r} (first on line {seen[key]})", _line(key_node))
                except TypeError:  # an unhashable key: SafeConstructor reports it below
                    continue
                seen[key] = _line(key_node)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_float(self, node):
        value = super().construct_yaml_float(node)
        if not math.isfinite(value):
            raise YAMLRefused(f"{node.value!r} is not a finite number", _line(node))
        return value


    def construct_yaml_int(self, node):
        try:
            return super().construct_yaml_int(node)
        except ValueError:  # more digits than int() converts (sys.get_int_max_str_digits)
            raise YAMLRefused(f"an integer of {len(str(node.value))} characters", _line(node)) from None


_BoundedLoader.add_constructor("tag:yaml.org,2002:float", _BoundedLoader.construct_yaml_float)
_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_yaml_int)


def expanded_size(root: Node, limit: int) -> int:
    """Nodes in the document once every alias is expanded (counted, never built); stops past `limit`."""
    sizes: dict[int, int] = {}
    # Iterative post-order walk over the node graph (aliases make it a DAG; a recursive alias a cycle).
    stack: list[tuple[Node, bool]] = [(root, False)]
    on_path: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            children = _children(node)
            sizes[key] = min(limit + 1, 1 + sum(sizes[id(c)] for c in children))
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise YAMLRefused("an alias refers to the node that contains it", _line(node))
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in sizes)
    return sizes[id(root)]


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def read_yaml(text: str):
    """Parse one YAML document under the limits above (yaml.YAMLError for malformed YAML)."""
    loader = _BoundedLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = expanded_size(node, MAX_NODES)
        if size > MAX_NODES:
            raise YAMLRefused(f"the document expands to more than {MAX_NODES} nodes (an alias bomb?)", None)
        return loader.construct_document(node)
    finally:
        loader.dispose()
