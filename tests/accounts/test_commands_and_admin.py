import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from accounts.models import Agent, ApiKey, Team
from accounts.services import authenticate_key

pytestmark = pytest.mark.django_db


def test_commands_create_a_team_an_agent_and_a_key_shown_once(capsys):
    call_command("create_team", "acme", "--name", "Acme")
    call_command("create_agent", "--team", "acme", "--slug", "coach", "--persona", "Be kind.")
    capsys.readouterr()
    call_command("create_api_key", "--team", "acme", "--agent", "coach", "--admin")
    out = capsys.readouterr()
    key = out.out.strip()
    assert "not be shown again" in out.err
    api_key = authenticate_key(key)
    assert api_key is not None
    assert (api_key.agent.slug, api_key.team.slug, api_key.can_admin) == ("coach", "acme", True)
    assert key.split("_")[2] not in str(ApiKey.objects.values().get())
    assert Agent.objects.get().persona == "Be kind."
    with pytest.raises(CommandError, match="already exists"):
        call_command("create_team", "acme")
    with pytest.raises(CommandError, match="No agent 'nobody'"):
        call_command("create_api_key", "--team", "acme", "--agent", "nobody")


def test_admin_shows_a_new_key_once_and_stores_only_its_hash(client):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "a-long-password-1")
    client.force_login(user)
    team = Team.objects.create(slug="acme", name="Acme")
    agent = Agent.objects.create(team=team, slug="coach", name="Coach")
    response = client.post("/admin/accounts/apikey/add/", {"agent": agent.pk, "name": "from admin", "can_admin": "on"})
    assert response.status_code == 200
    assert [str(m) for m in response.context["messages"]] == []  # not carried to another page in a cookie
    page = response.content.decode()
    assert "It is admin-capable" in page
    plaintext = page.split('<code id="new-key">')[1].split("<")[0]
    assert authenticate_key(plaintext).name == "from admin"
    change_page = client.get(f"/admin/accounts/apikey/{ApiKey.objects.get().pk}/change/")
    assert plaintext not in change_page.content.decode()
    assert plaintext.split("_")[2] not in change_page.content.decode()
