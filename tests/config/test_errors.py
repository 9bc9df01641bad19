import json

import pytest
from django.test import override_settings

from accounts.models import Person

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
