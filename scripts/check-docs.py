#!/usr/bin/env python3
"""scripts/check-docs.py: checks the project's prose for what its standards ask.

Usage: scripts/check-docs.py [REPO]   (default: the repository this script is in)

It checks README.md, ARCHITECTURE.md, CONTRIBUTING.md, CHANGELOG.md and docs/*.md:

* no paragraph has more than 150 words. A paragraph is a run of non-blank lines
  outside fenced code blocks, tables and headings; each bullet or numbered item is a
  paragraph of its own;
* docs/performance.md has at most 230 lines;
* every relative Markdown link, inline `[text](path)` or a reference `[name]: path`,
  names a file or directory that exists (relative to the Markdown file; `#anchor`
  parts are not checked);
* every backticked repository path (one starting with crates/, scripts/, docs/, fuzz/
  or .ci/) exists, relative to the repository's root. A glob (`crates/*`) must match
  something; a Rust item after the path (`path.rs::Type::fn`) is ignored.

It also checks the comments of every Cargo.toml for paths that do not exist: tokens
starting with one of the prefixes above, or ending in a file extension (`.md`, `.rs`,
...), relative to the repository's root or to the Cargo.toml's own folder.

Each problem is printed as FILE:LINE: WHAT. The exit status is 1 when there is one,
else 0. Only the standard library is used.
"""

import glob
import os
import re
import sys

MAX_WORDS = 150
PERFORMANCE_MAX_LINES = 230
PREFIXES = ("crates/", "scripts/", "docs/", "fuzz/", ".ci/")
EXTENSIONS = ("md", "rs", "sh", "py", "toml", "json", "yml", "yaml", "tsv", "txt")

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^\s{0,3}#{1,6}(\s|$)")
TABLE = re.compile(r"^\s*\|")
ITEM = re.compile(r"^\s*([*+-]|\d+[.)])\s+")
# [text](target) or [text](target "title"); an image's ![..](..) as well.
INLINE_LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(\s|$)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
CARGO_PATH = re.compile(
    r"(?<![\w./-])((?:\.?[\w*-]+/)*[\w*-]+\.(?:%s)|(?:%s)[\w./*-]*)"
    % ("|".join(EXTENSIONS), "|".join(re.escape(p) for p in PREFIXES))
)


def markdown_files(repo):
    names = ["README.md", "ARCHITECTURE.md", "CONTRIBUTING.md", "CHANGELOG.md"]
    files = [n for n in names if os.path.isfile(os.path.join(repo, n))]
    files += sorted(
        os.path.relpath(p, repo) for p in glob.glob(os.path.join(repo, "docs", "*.md"))
    )
    return files


def cargo_files(repo):
    """Every Cargo.toml of the repository, outside build output and git's folder."""
    found = []
    for folder, subfolders, files in os.walk(repo):
        subfolders[:] = sorted(
            d for d in subfolders if d not in ("target", ".git", "node_modules")
        )
        if "Cargo.toml" in files:
            found.append(os.path.relpath(os.path.join(folder, "Cargo.toml"), repo))
    return sorted(found, key=lambda n: (n != "Cargo.toml", n))


def exists(path):
    """Whether `path` (absolute) names something; a glob must match something."""
    if any(c in path for c in "*?["):
        return bool(glob.glob(path))
    return os.path.exists(path)


def repo_path(text):
    """The repository path a code span names, or None when it names none."""
    token = text.strip().split()[0] if text.strip() else ""
    if not token.startswith(PREFIXES):
        return None
    token = token.split("::")[0]  # a Rust item after the file
    token = re.sub(r":\d+(:\d+)?$", "", token)  # a line number
    token = token.rstrip(".,;:)")
    return token


def paragraphs(lines):
    """(first line number, words) of each paragraph of a Markdown file's lines."""
    out = []
    start, words = None, 0
    fenced = False

    def end():
        nonlocal start, words
        if start is not None:
            out.append((start, words))
        start, words = None, 0

    for number, line in enumerate(lines, 1):
        if FENCE.match(line):
            end()
            fenced = not fenced
            continue
        if fenced or not line.strip() or HEADING.match(line) or TABLE.match(line):
            end()
            continue
        if ITEM.match(line):
            end()
        if start is None:
            start = number
        words += len(line.split())
    end()
    return out


def check_markdown(repo, name, problems):
    path = os.path.join(repo, name)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()

    for number, words in paragraphs(lines):
        if words > MAX_WORDS:
            problems.append(
                f"{name}:{number}: a paragraph of {words} words (at most {MAX_WORDS})"
            )

    if name == os.path.join("docs", "performance.md") and len(lines) > PERFORMANCE_MAX_LINES:
        problems.append(
            f"{name}:{len(lines)}: {len(lines)} lines (at most {PERFORMANCE_MAX_LINES})"
        )

    here = os.path.dirname(path)
    fenced = False
    for number, line in enumerate(lines, 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        targets = INLINE_LINK.findall(line)
        reference = REFERENCE.match(line)
        if reference:
            targets.append(reference.group(1))
        for target in targets:
            if SCHEME.match(target) or target.startswith("#"):
                continue
            file_part = target.split("#")[0]
            if file_part and not exists(os.path.normpath(os.path.join(here, file_part))):
                problems.append(f"{name}:{number}: link to {target}: no such file")
        # Code spans, once links are out of the way (a link's text may be one).
        for _, span in CODE_SPAN.findall(line):
            target = repo_path(span)
            if target and not exists(os.path.join(repo, target)):
                problems.append(f"{name}:{number}: `{target}`: no such file")


def check_cargo(repo, name, problems):
    path = os.path.join(repo, name)
    here = os.path.dirname(path)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for number, line in enumerate(lines, 1):
        # A comment: a `#` outside a string (Cargo.toml's strings hold no `#` here).
        hash_at = line.find("#")
        if hash_at < 0 or line[:hash_at].count('"') % 2:
            continue
        for token in CARGO_PATH.findall(line[hash_at + 1 :]):
            token = token.rstrip(".,;:)")
            candidates = [os.path.join(repo, token), os.path.join(here, token)]
            if not any(exists(c) for c in candidates):
                problems.append(f"{name}:{number}: {token} (in a comment): no such file")


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    repo = os.path.abspath(repo)
    problems = []
    for name in markdown_files(repo):
        check_markdown(repo, name, problems)
    for name in cargo_files(repo):
        check_cargo(repo, name, problems)
    for p in problems:
        print(p)
    if problems:
        print(f"check-docs: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
