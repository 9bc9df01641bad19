"""The documentation stands alone: every link resolves inside the repository or goes to a public
https site, and nothing points at files a clone of this repository does not have."""

from __future__ import annotations

import ipaddress
import itertools
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    *sorted(ROOT.glob("clients/*/README.md")),
    *sorted(DOCS.glob("*.md")),
]

# Files that exist on the machine of whoever wrote this repository, never in a clone of it.
OUTSIDE = re.compile(r"\.\./shared|design\.md", re.IGNORECASE)
NOT_IN_A_CLONE = {".venv", "var", "node_modules"}
PRIVATE_NAMES = re.compile(
    r"(^|\.)(localhost|local|internal|test|invalid|example|lan|home\.arpa)$|^example\.(com|net|org)$"
)
BARE_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s<>()\[\]`\"']+", re.IGNORECASE)
LOCAL_MENTION = re.compile(r"localhost|127\.0\.0\.1|\[::1\]|0\.0\.0\.0", re.IGNORECASE)
HTML_LINK = re.compile(r"""\b(?:href|src)\s*=\s*["']([^"']*)["']""", re.IGNORECASE)

_markdown = MarkdownIt("commonmark").enable("table")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _inline_text(token: Token) -> str:
    return "".join(child.content for child in token.children or [] if child.type in ("text", "code_inline"))


def anchors(path: Path) -> set[str]:
    tokens = _markdown.parse(path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    found = set()
    for opening, inline in itertools.pairwise(tokens):
        if opening.type != "heading_open":
            continue
        slug = _slug(_inline_text(inline))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def _external_problem(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme != "https":
        return f"{url}: only https links may leave the repository"
    host = (parts.hostname or "").lower()
    if not host:
        return f"{url}: no host"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        if "." not in host or PRIVATE_NAMES.search(host):
            return f"{url}: {host} is not a public host"
        return None
    if not address.is_global:
        return f"{url}: {host} is not a public address"
    return None


def _local_problem(page: Path, href: str, root: Path) -> str | None:
    parts = urlsplit(href)
    if parts.path.startswith("/"):
        return f"{href}: an absolute path; link with a path relative to {page.name}"
    target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
    if not target.is_relative_to(root):
        return f"{href}: leaves the repository"
    if NOT_IN_A_CLONE & set(target.relative_to(root).parts):
        return f"{href}: not part of the repository"
    if not target.exists():
        return f"{href}: {target.relative_to(root)} does not exist"
    if parts.fragment:
        if target.suffix != ".md":
            return f"{href}: an anchor into a file that is not Markdown"
        if parts.fragment not in anchors(target):
            return f"{href}: no heading #{parts.fragment} in {target.relative_to(root)}"
    return None


def _link_problem(page: Path, href: str, root: Path) -> str | None:
    if re.match(r"[a-z][a-z0-9+.-]*:", href, re.IGNORECASE):
        return _external_problem(href)
    return _local_problem(page, href, root)


def problems(page: Path, root: Path = ROOT) -> list[str]:
    """Everything wrong with one Markdown page's links and mentions."""
    text = page.read_text(encoding="utf-8")
    found = [f"mentions {match.group(0)!r}, which a clone does not have" for match in OUTSIDE.finditer(text)]
    hrefs: list[str] = []
    for token in _markdown.parse(text):
        if token.type in ("html_block", "html_inline"):
            hrefs += HTML_LINK.findall(token.content)
        for child in token.children or []:
            if child.type == "link_open":
                hrefs.append(str(child.attrGet("href")))
            elif child.type == "image":
                hrefs.append(str(child.attrGet("src")))
            elif child.type == "html_inline":
                hrefs += HTML_LINK.findall(child.content)
            elif child.type == "text":  # prose: code spans and blocks may name local addresses
                hrefs += [match.group(0).rstrip(".,;:!?") for match in BARE_URL.finditer(child.content)]
                found += [f"prose mentions {m.group(0)!r}" for m in LOCAL_MENTION.finditer(child.content)]
    found += [problem for href in hrefs if (problem := _link_problem(page, href, root))]
    return [f"{page.relative_to(root)}: {problem}" for problem in found]


def _link_targets(page: Path) -> set[Path]:
    targets = set()
    for token in _markdown.parse(page.read_text(encoding="utf-8")):
        for child in token.children or []:
            href = str(child.attrGet("href")) if child.type == "link_open" else ""
            if href and not re.match(r"[a-z][a-z0-9+.-]*:", href, re.IGNORECASE):
                targets.add((page.parent / unquote(urlsplit(href).path)).resolve())
    return targets


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_links_resolve_and_stay_in_the_repository_or_go_to_public_https_sites(page: Path):
    assert problems(page) == []


def test_the_docs_are_indexed_and_the_readme_leads_to_them():
    assert {"README.md", "concepts.md", "api.md", "operations.md", "privacy.md"} <= {p.name for p in PAGES}
    assert (DOCS / "README.md").resolve() in _link_targets(ROOT / "README.md")
    index = _link_targets(DOCS / "README.md")
    unlisted = [page.name for page in DOCS.glob("*.md") if page.name != "README.md" and page.resolve() not in index]
    assert unlisted == [], "every page in docs/ is listed in docs/README.md"


# --- the checker itself finds what it is for ----------------------------------------------------


@pytest.mark.parametrize(
    ("markdown", "complaint"),
    [
        ("[gone](missing.md)", "missing.md does not exist"),
        ("[gone](other.md#nowhere)", "no heading #nowhere"),
        ("[here](#nowhere)", "no heading #nowhere"),
        ("[out](../../outside.md)", "leaves the repository"),
        ("[abs](/docs/other.md)", "an absolute path"),
        ("[plain](http://example.org/page)", "only https links"),
        ("[local](https://localhost:8000/api/)", "not a public host"),
        ("[private](https://10.0.0.7/)", "not a public address"),
        ("[bare](https://intranet/)", "not a public host"),
        ("see https://127.0.0.1:8000/healthz for health", "not a public address"),
        ("open localhost:8000 in a browser", "prose mentions 'localhost'"),
        ("The design is in ../shared/DESIGN.md.", "a clone does not have"),
        ("```sh\ncat DESIGN.md\n```", "a clone does not have"),
    ],
)
def test_the_checker_reports(tmp_path: Path, markdown: str, complaint: str):
    (tmp_path / "repo" / "docs").mkdir(parents=True)
    (tmp_path / "repo" / "docs" / "other.md").write_text("# Other\n\n## A section\n")
    page = tmp_path / "repo" / "docs" / "page.md"
    page.write_text(f"# Page\n\n{markdown}\n")
    found = problems(page, root=tmp_path / "repo")
    assert any(complaint in problem for problem in found), found


def test_the_checker_accepts_what_is_allowed(tmp_path: Path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other\n\n## A `code` section: here\n\n## A `code` section: here\n")
    page = tmp_path / "docs" / "page.md"
    page.write_text(
        "# Page\n\n## Local bits\n\n"
        "[other](other.md), [section](other.md#a-code-section-here), [again](other.md#a-code-section-here-1), "
        "[up](#local-bits), [docs](https://docs.djangoproject.com/en/6.0/).\n\n"
        "Run `curl http://127.0.0.1:8000/healthz`, or:\n\n```sh\ncurl http://localhost:8000/healthz\n```\n"
    )
    assert problems(page, root=tmp_path) == []
