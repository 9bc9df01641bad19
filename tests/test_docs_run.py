"""The code the docs tell a reader to paste runs: every block marked `<!-- run -->` in the README,
CONTRIBUTING, docs/ and the clients' READMEs is run against the live server, as pasted.

A reader pastes them after `make run`, in the repository's directory: the server at
127.0.0.1:8000 and the demo's agent key in var/demo/agent_key. Here the blocks run in a directory
of their own whose var/demo/agent_key holds a test key, with the address replaced by the live
server's, and nothing else changed. In the README, a block that is not run says why
(`<!-- not run: ... -->`); the front door has no block a reader cannot trust.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from tests.support.fixtures import Tenant

ROOT = Path(__file__).resolve().parent.parent
PAGES = [
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    *sorted(ROOT.glob("clients/*/README.md")),
    *sorted((ROOT / "docs").glob("*.md")),
]
RUN = re.compile(r"^<!--\s*run\s*-->\s*$")
NOT_RUN = re.compile(r"^<!--\s*not run:\s*\S[^>]*-->\s*$")
WHERE_MAKE_RUN_SERVES = "http://127.0.0.1:8000"
RUNNERS = {"sh": ["bash", "-euo", "pipefail", "-c"], "python": [sys.executable, "-c"]}
# Diagrams, and what a shell prints, are read, not run.
NEVER_RUN = {"mermaid", "text", "json", ""}

pytestmark = pytest.mark.django_db(transaction=True)

_markdown = MarkdownIt("commonmark")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    code: str
    marker: str  # "run", "not run", or "" when unmarked

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    found = []
    tokens = _markdown.parse(page.read_text(encoding="utf-8"))
    for before, token in zip([None, *tokens], tokens, strict=False):
        if token.type != "fence":
            continue
        marker = ""
        if before is not None and before.type == "html_block":
            comment = before.content.strip()
            marker = "run" if RUN.match(comment) else "not run" if NOT_RUN.match(comment) else ""
        line = (token.map or [0])[0] + 1
        found.append(Block(page, line, token.info.strip().split(" ")[0], token.content, marker))
    return found


def sessions() -> list[list[Block]]:
    """What a reader pastes into one terminal: a page's shell blocks, in order (a later block may use
    what an earlier one set, as the API guide's examples use its URL and KEY); each Python block alone."""
    found = []
    for page in PAGES:
        marked = [block for block in blocks(page) if block.marker == "run"]
        shell = [block for block in marked if block.language == "sh"]
        found += [shell] if shell else []
        found += [[block] for block in marked if block.language != "sh"]
    return found


def test_the_readme_runs_what_it_shows_or_says_why_not():
    readme = blocks(ROOT / "README.md")
    unexplained = [str(b) for b in readme if b.language not in NEVER_RUN and not b.marker]
    assert unexplained == [], "README blocks with neither <!-- run --> nor <!-- not run: why -->"
    assert sum(b.marker == "run" for b in readme) >= 2  # the remember/recall pair and the client's turn


def test_the_front_door_is_short_and_has_a_picture():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 120
    assert re.search(r"!\[[^\]]+\]\(docs/images/[^)]+\.png\)", text)


def test_a_marker_is_read_only_on_the_line_before_a_block(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- run -->\n```sh\necho one\n```\n\n<!-- run -->\n\nSome prose.\n\n```sh\necho two\n```\n"
        "<!-- not run: it serves forever -->\n```sh\nmake run\n```\n"
    )
    found = blocks(page)
    assert [(b.code, b.marker) for b in found] == [("echo one\n", "run"), ("echo two\n", ""), ("make run\n", "not run")]


@pytest.mark.parametrize("session", sessions(), ids=lambda session: str(session[0]))
def test_the_blocks_marked_run_run_as_pasted(session: list[Block], web_server: str, tenant: Tenant, tmp_path: Path):
    language = session[0].language
    assert language in RUNNERS, f"{session[0]}: a block marked run must be sh or python, not {language!r}"
    (tmp_path / "var" / "demo").mkdir(parents=True)
    (tmp_path / "var" / "demo" / "agent_key").write_text(tenant.key.plaintext + "\n")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")},
        # What the README's first block exports, for the blocks after it.
        "MNEMO_URL": web_server,
        "MNEMO_KEY": tenant.key.plaintext,
    }
    # Each block says where it starts, so a failure names the block it happened in.
    code = "".join(f"echo '--- {block}'\n{block.code}" if language == "sh" else block.code for block in session)
    code = code.replace(WHERE_MAKE_RUN_SERVES, web_server.rstrip("/"))
    result = subprocess.run(
        [*RUNNERS[language], code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"{session[0]} failed:\n{result.stdout}\n{result.stderr}"
    assert '"error"' not in result.stdout, f"an API error:\n{result.stdout}"
