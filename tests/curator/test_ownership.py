"""One owner per model: the curator changes conversations, messages, banks and notes only through
the services of the apps that own them (conversations.services, memory.services)."""

from __future__ import annotations

import ast

from tests.support.code_scan import call_chain
from tests.support.fixtures import ROOT

OWNED_ELSEWHERE = {"Conversation", "Message", "Bank", "Note"}
WRITE_METHODS = {"create", "bulk_create", "bulk_update", "update", "update_or_create", "get_or_create", "delete"}


def foreign_writes_in(source: str, shown: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        chain = call_chain(node.func)
        # The curator saves no instance of any model; its own ProviderCall rows are created by query.
        if chain[0] == "save" or (chain[0] in WRITE_METHODS and OWNED_ELSEWHERE & set(chain[1:])):
            found.append(f"{shown}:{node.lineno} {'.'.join(reversed(chain))}")
    return found


def test_the_curator_writes_no_row_of_another_app_itself():
    offenders = [
        write
        for path in sorted((ROOT / "curator").rglob("*.py"))
        if "migrations" not in path.parts
        for write in foreign_writes_in(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert offenders == []


def test_the_check_finds_a_foreign_write_when_there_is_one():
    rogue = (
        "def sneak(conversation, bank):\n"
        "    Conversation.objects.filter(pk=conversation.pk).update(curation_pending=False)\n"
        "    Bank.objects.select_for_update().get(pk=bank.pk)\n"
        "    bank.save(update_fields=['is_full'])\n"
    )
    assert len(foreign_writes_in(rogue, "rogue.py")) == 2
