"""Review through the client: the tool methods answer a proposal without raising, and an
admin-capable key lists, keeps and declines what waits."""

from __future__ import annotations

import pytest
from mnemo_client import AsyncMnemo, Conflict, Mnemo, PermissionDenied

from accounts.services import issue_api_key
from memory.models import Note
from tests.support.fixtures import Tenant, run_async

pytestmark = pytest.mark.django_db(transaction=True)


def test_review_through_the_client(web_server: str, tenant: Tenant, mnemo: Mnemo) -> None:
    mnemo.register_person("ada")
    with pytest.raises(PermissionDenied):
        mnemo.set_review_writes("ada", True)  # a plain key
    admin_key = issue_api_key(agent=tenant.agent, name="admin", can_admin=True).plaintext
    with Mnemo(web_server, api_key=admin_key) as admin:
        assert admin.set_review_writes("ada", True)["review_writes"] is True

        tea = mnemo.remember(person="ada", key="tea", description="What Ada drinks", content="Green tea.")
        figs = mnemo.remember_about_user(person="ada", category="food", observation="Likes figs.")
        assert (tea["status"], tea["action"], tea["id"]) == ("proposed", "proposed", None)
        assert figs["status"] == "proposed"
        assert not Note.objects.exists()

        waiting = admin.list_proposals(person="ada", status="pending")
        assert [p["id"] for p in waiting["results"]] == [tea["proposal"], figs["proposal"]]
        assert [p["id"] for p in admin.iter_proposals(person="ada", page_size=1)] == [tea["proposal"], figs["proposal"]]
        kept = admin.approve_proposal(tea["proposal"], content="Green tea, no sugar.")
        assert (kept["action"], kept["proposal"]["status"]) == ("created", "kept")
        assert kept["note"] is not None
        assert Note.objects.get(pk=kept["note"]).content == "Green tea, no sugar."
        assert admin.reject_proposal(figs["proposal"])["status"] == "rejected"
        with pytest.raises(Conflict):
            admin.reject_proposal(figs["proposal"])
        hits = mnemo.recall_memories(person="ada", query="green tea")["results"]
        assert [hit["key"] for hit in hits] == ["tea"]

    async def asynchronously() -> list[int]:
        async with AsyncMnemo(web_server, api_key=admin_key) as client:
            await client.set_review_writes("ada", False)
            return [p["id"] async for p in client.iter_proposals(status="pending")]

    assert run_async(asynchronously) == []
