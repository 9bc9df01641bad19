import importlib
import json

import pytest
from django.test import override_settings

from accounts.models import Person
from config.errors import _CODE_BY_STATUS, STATUS_BY_CODE
from config.exceptions import DomainError
from tests.support.fixtures import ROOT

pytestmark = pytest.mark.django_db


def test_malformed_json_gets_400_in_the_error_shape(api):
    response = api.post("/api/v1/people", data="{not json", content_type="application/json")
    assert response.status_code == 400
    body = response.json()
    assert body["error"]["code"] == "invalid"
    assert "JSON parse error" in body["error"]["message"]


def test_validation_error_names_the_field(api):
    response = api.post("/api/v1/people", {"display_name": "Ada"}, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "error": {"code": "invalid", "message": "person: This field is required.", "field": "person"}
    }
    assert not Person.objects.exists()


def test_unknown_api_path_gets_a_json_404(api):
    response = api.get("/api/v1/no-such-thing")
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "not_found", "message": "Nothing at /api/v1/no-such-thing."}}


def test_missing_resource_gets_404_in_the_error_shape(api):
    response = api.get("/api/v1/people/nobody")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


@override_settings(API_MAX_BODY_BYTES=2048)
def test_oversized_body_gets_413_and_writes_nothing(api):
    body = json.dumps({"person": "p1", "display_name": "x" * 5000})
    response = api.post("/api/v1/people", data=body, content_type="application/json")
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"
    assert "limit is 2048 bytes" in response.json()["error"]["message"]
    assert not Person.objects.exists()


def test_wrong_method_gets_405_in_the_error_shape(api):
    response = api.delete("/api/v1/me")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_wrong_content_type_gets_415(api):
    response = api.post("/api/v1/people", data="person=p1", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_media_type"


def _domain_errors() -> list[type[DomainError]]:
    for app in ("accounts", "conversations", "curator", "memory"):
        importlib.import_module(f"{app}.exceptions")
    found, queue = [], [DomainError]
    while queue:
        cls = queue.pop()
        found.append(cls)
        queue.extend(cls.__subclasses__())
    return found


def test_every_domain_error_code_has_its_status_in_the_one_table():
    errors = _domain_errors()
    assert {"SlugTaken", "TurnAlreadyAnswered", "EditMismatch", "PlanRejected", "InvalidText"} <= {
        cls.__name__ for cls in errors
    }
    missing = {cls.__qualname__: cls.code for cls in errors if cls.code not in STATUS_BY_CODE}
    assert missing == {}
    assert not [cls for cls in errors if "http_status" in vars(cls)], "the status belongs in STATUS_BY_CODE only"


def test_codes_given_to_drf_errors_carry_the_status_of_the_table():
    assert {code: STATUS_BY_CODE[code] for code in _CODE_BY_STATUS.values()} == {
        code: status for status, code in _CODE_BY_STATUS.items()
    }


def test_a_domain_error_is_answered_with_its_code_and_the_tables_status(api):
    note = api.post(
        "/api/v1/tools/remember",
        {"person": "ada", "key": "home", "description": "Where Ada lives", "content": "Ada lives in Oslo."},
        format="json",
    ).json()
    call = {"person": "ada", "id": note["id"], "mode": "find_replace", "find": "Paris", "content": "Rome"}
    response = api.post("/api/v1/tools/edit_note", call, format="json")
    assert response.status_code == STATUS_BY_CODE["no_match"] == 422
    assert response.json()["error"] == {
        "code": "no_match",
        "message": "The text to find does not occur in the note; nothing was changed.",
        "field": "find",
    }


def test_the_mcp_server_uses_no_drf_code():
    assert "rest_framework" not in (ROOT / "config" / "mcp.py").read_text()
