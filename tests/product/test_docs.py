"""The docs a newcomer reads (README.md and docs/*.md), checked for what goes wrong when they are
followed as written: a curl command whose URL holds `[` `]` or `{` `}` without `-g` (curl takes
them for its own URL globbing and fails), a relative link to a file the repository does not have,
a fenced TOML or JSON example that does not parse; and for what means nothing to a reader of the
repository alone: a path outside it, an issue number of the tracker it was built from."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from support import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: what curl globs in a URL unless -g (--globoff) is given
GLOB_CHARACTERS = "[]{}"
#: what only the tracker or the machine the project was built on knows
OUTSIDE = [
    (re.compile(r"\.\./shared\b"), "a path outside the repository"),
    (re.compile(r"/work/"), "a path on the machine it was written on"),
    (re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE), "an issue number"),
    (re.compile(r"\b\d{3}_[0-9a-f]{16}\.txt\b"), "a source text the repository does not hold"),
]
#: a Markdown file named in the text (a link or not), a path from the root or from the doc
MARKDOWN_FILE = re.compile(r"(?<![\w/.-])((?:\.{1,2}/)*(?:[\w-]+/)*[\w.-]+\.md)\b")


@dataclass(frozen=True)
class Block:
    """A fenced code block: its info string (language), its text, the line of its opening fence."""

    language: str
    text: str
    line: int


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def fenced_blocks(text: str) -> list[Block]:
    blocks, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        opening = re.match(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)", lines[i])
        if not opening:
            i += 1
            continue
        fence, body, start = opening.group(2), [], i + 1
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        blocks.append(Block(opening.group(3).lower(), "\n".join(body) + "\n", start))
        i += 1
    return blocks


def prose(text: str) -> str:
    """The text without fenced blocks, indented code blocks and inline code: where links are."""
    kept, in_fence, fence = [], False, ""
    for line in text.splitlines():
        stripped = line.strip()
        if in_fence:
            in_fence = not stripped.startswith(fence)
            kept.append("")
            continue
        opening = re.match(r"(`{3,}|~{3,})", stripped)
        if opening:
            in_fence, fence = True, opening.group(1)
            kept.append("")
        elif line.startswith(("    ", "\t")) and not stripped.startswith(("-", "*", "|")):
            kept.append("")
        else:
            kept.append(re.sub(r"`[^`]*`", "``", line))
    return "\n".join(kept)


def curl_commands(text: str) -> list[tuple[int, str]]:
    """(line, command) for every curl command: in code blocks and in inline code alike, with
    backslash continuations joined, up to the end of the line, its code span or a pipe."""
    found, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        number, line = i + 1, lines[i]
        while line.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line.rstrip()[:-1] + " " + lines[i].strip()
        for match in re.finditer(r"(?<![\w/.-])curl\s[^`\n]*", line):
            found.append((number, match.group(0)))
        i += 1
    return found


def curl_arguments(command: str) -> list[str]:
    """The words of one curl command as the shell gives them, up to a pipe, a `;` or a comment."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|<>()")
    lexer.whitespace_split = True
    words = []
    for word in lexer:
        if word and set(word) <= set(";&|<>()"):
            break
        words.append(word)
    return words[1:]


def globs_off(arguments: list[str]) -> bool:
    return any(a == "--globoff" or (a.startswith("-") and not a.startswith("--") and "g" in a[1:])
               for a in arguments)


def test_the_checks_find_what_they_look_for() -> None:
    """Each check on a known bad sample, so that a check that can no longer fail is noticed."""
    bad = ("Run `curl -s 'http://h/v1/x?nodes=n[1-2]'` then\n\n"
           "    curl -s http://h/v1/glue/hosts \\\n      -d x 'http://h/a?nodes=n[1-2]' | jq .\n\n"
           "as issue 14 said (../shared/DESIGN.md); see [the map](nowhere.md).\n")
    commands = curl_commands(bad)
    assert [line for line, _ in commands] == [1, 3]
    assert [globs_off(curl_arguments(c)) for _, c in commands] == [False, False]
    assert curl_arguments(commands[1][1])[-1] == "http://h/a?nodes=n[1-2]"
    assert globs_off(curl_arguments("curl -sg 'http://h/?a=[1]'")) and globs_off(["--globoff"])
    assert not globs_off(curl_arguments("curl -s -H 'X: g' http://h/"))
    assert [why for pattern, why in OUTSIDE if pattern.search(bad)] == [
        "a path outside the repository", "an issue number"]
    assert OUTSIDE[2][0].search("as issue\n  #12 said")
    assert re.findall(r"\]\(([^)\s]+)", prose(bad)) == ["nowhere.md"]
    assert MARKDOWN_FILE.findall(bad) == ["../shared/DESIGN.md", "nowhere.md"]
    assert not _in_repository(ROOT / "../shared/DESIGN.md") and _in_repository(ROOT / "docs/api.md")
    assert not re.findall(r"\]\(", prose("`[a](b)`\n\n    [c](d)\n"))
    assert [b.language for b in fenced_blocks("```toml\na = 1\n```\n\n```\nx\n```\n")] == ["toml", ""]


@pytest.mark.parametrize("path", DOCS, ids=_name)
def test_a_curl_url_with_brackets_or_braces_says_g(path: Path) -> None:
    unguarded = []
    for line, command in curl_commands(path.read_text(encoding="utf-8")):
        arguments = curl_arguments(command)
        if any(c in a for a in arguments if not a.startswith("-") for c in GLOB_CHARACTERS) \
                and not globs_off(arguments):
            unguarded.append(f"{_name(path)}:{line}: {command.strip()}")
    assert not unguarded, "curl globs [] and {} in URLs; these need -g:\n" + "\n".join(unguarded)


@pytest.mark.parametrize("path", DOCS, ids=_name)
def test_nothing_outside_the_repository(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    found = [f"{_name(path)}:{text.count(chr(10), 0, match.start()) + 1}: {why}: {match.group(0)!r}"
             for pattern, why in OUTSIDE for match in pattern.finditer(text)]  # across line breaks too
    assert not found, "\n".join(found)


@pytest.mark.parametrize("path", DOCS, ids=_name)
def test_markdown_files_named_are_in_the_repository(path: Path) -> None:
    missing = sorted({name for name in MARKDOWN_FILE.findall(path.read_text(encoding="utf-8"))
                      if not _in_repository(ROOT / name) and not _in_repository(path.parent / name)})
    assert not missing, f"{_name(path)} names Markdown files the repository does not have: {missing}"


def _in_repository(file: Path) -> bool:
    file = file.resolve()
    return file.is_relative_to(ROOT) and file.exists()


@pytest.mark.parametrize("path", DOCS, ids=_name)
def test_relative_links_point_at_files_of_the_repository(path: Path) -> None:
    text = prose(path.read_text(encoding="utf-8"))
    targets = re.findall(r"\]\(\s*<?([^)\s>]+)", text) + re.findall(r"^\s*\[[^\]]+\]:\s*(\S+)", text, re.MULTILINE)
    broken = []
    for target in targets:
        if re.match(r"^([a-z][a-z0-9+.-]*:|#)", target, re.IGNORECASE):
            continue  # a URL with a scheme, or an anchor in this file
        if not _in_repository(path.parent / target.split("#")[0]):
            broken.append(target)
    assert not broken, f"{_name(path)} links to files the repository does not have: {broken}"


@pytest.mark.parametrize("path", DOCS, ids=_name)
def test_fenced_toml_and_json_examples_parse(path: Path) -> None:
    problems = []
    for block in fenced_blocks(path.read_text(encoding="utf-8")):
        try:
            if block.language == "toml":
                tomllib.loads(block.text)
            elif block.language == "json":
                json.loads(block.text)
        except ValueError as exc:  # tomllib.TOMLDecodeError and json.JSONDecodeError both are
            problems.append(f"{_name(path)}:{block.line}: a {block.language} example that does not parse: {exc}")
    assert not problems, "\n".join(problems)
