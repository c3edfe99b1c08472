"""YAML loading that remembers where each mapping and key came from, for file:line errors."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import yaml

from agentrun.lang.errors import Problem, SpecError


class PosDict(dict):
    """A dict that knows the (line, column) of itself and of each key, 1-based."""

    line: int = 0
    column: int = 0
    key_pos: dict[Any, tuple[int, int]]
    text_line: dict[Any, int]  # where a scalar value's text starts (the line after `|` or `>`)


class PosList(list):
    line: int = 0
    column: int = 0


# A spec is small: past these it is a mistake or an attack (a "billion laughs" of aliases), refused
# before anything walks it.
MAX_DEPTH = 64
MAX_VALUES = 20_000


class _Loader(yaml.SafeLoader):
    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise yaml.MarkedYAMLError(problem=f"nested more than {MAX_DEPTH} levels deep", problem_mark=mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_document(self, node: Any) -> Any:
        _check_size(node)
        return super().construct_document(node)


def _check_size(root: yaml.Node) -> None:
    """Refuse a document whose aliases expand it past MAX_VALUES values, or refer to themselves:
    counted over the node graph, each shared node once, so the check itself stays small."""
    sizes: dict[int, int] = {}
    visiting: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        children = _children(node)
        if children_done:
            visiting.discard(id(node))
            sizes[id(node)] = min(1 + sum(sizes[id(c)] for c in children), MAX_VALUES + 1)
            if sizes[id(node)] > MAX_VALUES:
                problem = f"this document holds more than {MAX_VALUES:,} values (an alias counts each time it is used)"
                raise yaml.MarkedYAMLError(problem=problem, problem_mark=node.start_mark)
            continue
        if id(node) in sizes:
            continue
        if id(node) in visiting:
            raise yaml.MarkedYAMLError(problem="an alias refers to the value it is in", problem_mark=node.start_mark)
        visiting.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)


# Below this size a document cannot hold MAX_VALUES values (each takes a character and a separator).
_COUNT_FROM = 2 * MAX_VALUES
_VALUE_EVENTS = (yaml.ScalarEvent, yaml.AliasEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent)


def _count_values(text: str) -> None:
    """Refuse a large document of too many values before the position-keeping reader, which takes
    about 25 µs a value, reads it: libyaml's parser counts them in a tenth of that."""
    if len(text) < _COUNT_FROM or not yaml.__with_libyaml__:
        return
    count = 0
    for event in yaml.parse(text, Loader=yaml.CSafeLoader):
        count += isinstance(event, _VALUE_EVENTS)
        if count > MAX_VALUES:
            problem = f"this document holds more than {MAX_VALUES:,} values (an alias counts each time it is used)"
            raise yaml.MarkedYAMLError(problem=problem, problem_mark=event.start_mark)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _construct_int(loader: _Loader, node: yaml.ScalarNode) -> int:
    try:
        return yaml.SafeLoader.construct_yaml_int(loader, node)
    except ValueError:  # Python refuses to read integers of more than 4,300 digits
        raise yaml.MarkedYAMLError(problem="this number has too many digits", problem_mark=node.start_mark) from None


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> PosDict:
    loader.flatten_mapping(node)
    result = PosDict()
    result.line, result.column = node.start_mark.line + 1, node.start_mark.column + 1
    result.key_pos, result.text_line = {}, {}
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            problem = "a key must be a name or a value, not a list or a mapping"
            raise yaml.MarkedYAMLError(problem=problem, problem_mark=key_node.start_mark)
        key = loader.construct_object(key_node, deep=True)
        if key in result:
            mark = key_node.start_mark
            raise yaml.MarkedYAMLError(problem=f"duplicate key '{key}'", problem_mark=mark)
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_pos[key] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
        block = isinstance(value_node, yaml.ScalarNode) and value_node.style in ("|", ">")
        result.text_line[key] = value_node.start_mark.line + (2 if block else 1)
    return result


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode) -> PosList:
    result = PosList(loader.construct_object(child, deep=True) for child in node.value)
    result.line, result.column = node.start_mark.line + 1, node.start_mark.column + 1
    return result


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)
_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def yaml_text(path: str, text: str) -> str:
    """A spec's text for the YAML reader, which reads JSON too. JSON allows tabs between tokens,
    where YAML refuses them, and a valid JSON file has no raw tab anywhere else, so in a .json file
    each becomes a space (lines and columns stay where they were)."""
    return text.replace("\t", " ") if path.lower().endswith(".json") else text


def load_yaml(text: str, file: str) -> Any:
    try:
        _count_values(text)
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        message = " ".join(str(x) for x in (exc.context, exc.problem) if x)
        raise SpecError([Problem(file, line, col, f"YAML syntax: {message}", _yaml_hint(message))]) from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow, before any parsing
        before = text[: exc.position]
        line, col = before.count("\n") + 1, exc.position - (before.rfind("\n") + 1) + 1
        hint = "remove it; inside a double-quoted string it can be written as an escape such as \\x01"
        message = f"a control character (#x{exc.character:04x}) is not allowed in YAML"
        raise SpecError([Problem(file, line, col, message, hint)]) from None


def load_mapping(text: str, file: str) -> PosDict:
    """A YAML spec's top-level mapping; SpecError for a syntax error or any other top level."""
    data = load_yaml(text, file)
    if not isinstance(data, PosDict):
        hint = "start with keys such as name:, params:, subtasks:"
        raise SpecError([Problem(file, 1, 1, "a spec must be a YAML mapping at the top level", hint)])
    return data


@lru_cache(maxsize=4)
def mapping_or_none(text: str) -> PosDict | None:
    """The top-level mapping, or None when the text is not a YAML mapping: for telling languages
    apart, each dialect asking of the same text (so it is parsed once; callers only read it)."""
    try:
        _count_values(text)
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except (yaml.YAMLError, RecursionError):
        return None
    return data if isinstance(data, PosDict) else None


def _yaml_hint(message: str) -> str:
    if any(mark in message for mark in ("nested more than", "values (an alias", "refers to the value")):
        return "a spec this large or deep is a mistake; write the values out, or load data with -p KEY=@FILE"
    if "key must be a name" in message:
        return "write a plain key such as name: (a '? ' line starts a complex key)"
    if "too many digits" in message:
        return "quote it if it is meant as text"
    if "mapping values are not allowed" in message:
        return "check the indentation here, or quote a value that contains ': '"
    if "could not find expected ':'" in message or "expected <block end>" in message:
        return "check the indentation of this line against the lines above it"
    if "duplicate key" in message:
        return "each key may appear once in a mapping; rename or merge the two"
    if "expected ',' or '}'" in message or "expected ',' or ']'" in message:
        return "a ',' is missing between two entries before here, or a '{' or '[' is not closed"
    if "found character '\\t'" in message:
        return "YAML does not allow tabs for indentation; use spaces"
    return "fix the YAML syntax at this position"


def plain(value: Any) -> Any:
    """Loaded YAML as plain dicts and lists, without positions: the Plan carries plain JSON data,
    whose keys are text."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def position(data: Any, path: tuple) -> tuple[int, int]:
    """The best known (line, column) for a path of keys/indexes into loaded YAML."""
    best = (getattr(data, "line", 0), getattr(data, "column", 0))
    node = data
    for key in path:
        if isinstance(node, PosDict) and key in node:
            best = node.key_pos.get(key, best)
            node = node[key]
        elif isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
            node = node[key]
            best = (getattr(node, "line", best[0]), getattr(node, "column", best[1])) if hasattr(node, "line") else best
        else:
            break
    return best


def text_line(data: Any, path: tuple) -> int:
    """The line where the text of the scalar at `path` starts; 0 if unknown."""
    node = data
    for key in path[:-1]:
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            return 0
    return getattr(node, "text_line", {}).get(path[-1], 0) if isinstance(node, PosDict) else 0
