"""A seeded corpus of broken and hostile specs made from the shipped examples: mutations a user
makes by mistake (a deleted character, a line indented wrong, a misspelled key) and inputs an
attacker makes on purpose (other encodings, control characters, alias bombs, deep nesting, huge
numbers and templates). Each is written to a file; the fuzz test validates every one."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [
    ROOT / "examples" / "quickstart.yaml",
    ROOT / "examples" / "release.yaml",
    ROOT / "examples" / "pipelines" / "lead-scoring.yaml",
    ROOT / "examples" / "pipelines" / "research-to-proposal.yaml",
    ROOT / "examples" / "trees" / "deploy.yaml",
    ROOT / "examples" / "trees" / "release.json",
]

BOMB = "".join(f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]\n" for n in range(1, 9))
HOSTILE: list[tuple[str, bytes]] = [
    ("nul", b'subtasks:\n  a: {instructions: "x\x00y"}\n'),
    ("control", b"subtasks:\n  a: {instructions: x\x07}\n"),
    ("latin1", "subtasks:\n  a: {instructions: café}\n".encode("latin-1")),
    ("utf16", "subtasks:\n  a: {instructions: hello}\n".encode("utf-16")),
    ("invalid-bytes", b"subtasks:\n  a: {instructions: \xff\xfe\xfd}\n"),
    ("complex-key", b"? [a, b]\n: 1\nsubtasks: {}\n"),
    ("big-int", b"subtasks:\n  a: {instructions: x, timeout: " + b"9" * 5000 + b"}\n"),
    ("deep-yaml", b"subtasks: " + b"[" * 500 + b"]" * 500 + b"\n"),
    ("deep-mapping", b"".join(b"  " * i + b"k:\n" for i in range(300)) + b"  " * 300 + b"v\n"),
    ("alias-bomb", ("l0: &l0 [lol]\n" + BOMB + "subtasks: {a: {instructions: go}}\n").encode()),
    ("recursive-alias", b"a: &a [*a]\nsubtasks: {b: {instructions: go}}\n"),
    ("deep-if", ('subtasks:\n  a: {instructions: "' + "{% if x %}" * 500 + "{% endif %}" * 500 + '"}\n').encode()),
    ("deep-parens", ('subtasks:\n  a: {instructions: "{{ ' + "(" * 1000 + "x" + ")" * 1000 + ' }}"}\n').encode()),
    ("many-keys", ("subtasks:\n  a:\n" + "".join(f"    key{i}: {i}\n" for i in range(50_000))).encode()),
    ("empty", b""),
    ("only-comment", b"# nothing here\n"),
    ("scalar", b"just a string\n"),
    ("list", b"- a\n- b\n"),
    ("tabs", b"subtasks:\n\ta: {instructions: go}\n"),
    ("int-steps", b"workflow:\n  name: x\n  agents:\n    a: {role: r, prompt: p}\n  steps: 3\n"),
    ("huge-name-list", b"name: [" + b",".join([b"0"] * 150_000) + b"]\nsubtasks:\n  a: {instructions: hi}\n"),
]


def corpus(seed: int = 1234, per_source: int = 80) -> Iterator[tuple[str, bytes]]:
    """(name, content) pairs: the hostile ones, then `per_source` mutations of each example."""
    yield from HOSTILE
    rng = random.Random(seed)
    for source in SOURCES:
        text = source.read_text()
        # Named by the path under examples/: two examples may share a file name (release.yaml, trees/release.json).
        name = "-".join(source.relative_to(ROOT / "examples").with_suffix("").parts)
        for n in range(per_source):
            yield f"{name}-{n}", _mutate(rng, text).encode("utf-8", "surrogatepass")


def _mutate(rng: random.Random, text: str) -> str:
    lines = text.splitlines(keepends=True)
    kind = rng.randrange(7)
    i = rng.randrange(len(lines))
    if kind == 0:  # a deleted character
        at = rng.randrange(len(text))
        return text[:at] + text[at + 1 :]
    if kind == 1:  # a line indented wrong
        lines[i] = (" " * rng.choice([1, 2, 3, 5])) + lines[i]
    elif kind == 2:  # a duplicated line
        lines.insert(i, lines[i])
    elif kind == 3:  # a misspelled key
        head, sep, rest = lines[i].partition(":")
        if sep and head.strip():
            j = rng.randrange(len(head))
            lines[i] = head[:j] + head[j + 1 :] + sep + rest
    elif kind == 4:  # a value replaced by something of another type
        head, sep, _ = lines[i].partition(":")
        if sep:
            lines[i] = (
                head + sep + " " + rng.choice(["[]", "{}", "-1", "true", "null", "1e400", "'{{'", "[1, [2]]"]) + "\n"
            )
    elif kind == 5:  # a deleted line
        del lines[i]
    else:  # a broken template
        lines[i] = lines[i].replace("}}", "}", 1).replace("{{", "{{ (", 1)
    return "".join(lines)


def write_corpus(folder: Path) -> list[Path]:
    paths = []
    for name, content in corpus():
        path = folder / f"{name}.yaml"
        path.write_bytes(content)
        paths.append(path)
    return paths
