"""The memory package format is described once, by memory.package_format's pydantic models: what export
writes, what import validates and what the OpenAPI schema says all come from them."""

from __future__ import annotations

import pytest
from drf_spectacular.generators import SchemaGenerator
from pydantic import BaseModel

from memory.package_format import (
    FORMAT,
    MemoryPackage,
    MemoryPackageBank,
    MemoryPackageLine,
    MemoryPackageNote,
    MemoryPackageWithheld,
)
from memory.packages import export_person
from memory.services import remember


def undeclared(value: object, model: type[BaseModel], where: str = "") -> list[str]:
    """Members of an exported value that its model does not declare, recursively."""
    assert isinstance(value, dict), where
    nested: dict[str, tuple[type[BaseModel], bool]] = {
        "banks": (MemoryPackageBank, True),
        "notes": (MemoryPackageNote, True),
        "withheld": (MemoryPackageWithheld, False),
    }
    found = [f"{where}{name}" for name in value if name not in model.model_fields]
    for name, (inner, many) in nested.items():
        if name in value and name in model.model_fields:
            items = value[name] if many else [value[name]]
            for index, item in enumerate(items):
                found += undeclared(item, inner, f"{where}{name}[{index}].")
    return found


@pytest.mark.django_db
def test_an_export_is_a_package_the_models_declare_member_by_member(tenant, person, actor):
    remember(team=tenant.team, person=person, actor=actor, key="home-city", description="Home", content="Oslo.")
    remember(
        team=tenant.team, person=person, actor=actor, key="deadline", description="Apollo", content="Friday.",
        scope="project:apollo", bank="private", scope_refs={"project": ["apollo"]}, category="work",
    )  # fmt: skip

    exported = export_person(team=tenant.team, person=person, agent=tenant.agent)

    package = MemoryPackage.model_validate(exported)
    assert package.format == FORMAT
    assert [note.key for bank in package.banks for note in bank.notes] == ["home-city", "deadline"]
    assert undeclared(exported, MemoryPackage) == []


def test_a_jsonl_line_is_a_note_and_its_bank():
    line = MemoryPackageLine.model_validate(
        {"bank_kind": "private", "person": "ada", "scope": "project:apollo", "key": "k", "description": "d",
         "content": "c", "expires_at": "2030-01-01T00:00:00"}
    )  # fmt: skip
    assert (line.bank_kind, line.kind, line.category, line.expires_at.isoformat()) == (
        "private", "fact", "", "2030-01-01T00:00:00+00:00",
    )  # fmt: skip
    assert set(MemoryPackageLine.model_fields) == set(MemoryPackageNote.model_fields) | {
        "bank_kind", "person", "about", "scope", "bank",
    }  # fmt: skip


@pytest.mark.django_db
def test_the_openapi_schema_of_imports_and_exports_is_the_models():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]
    imports = schema["paths"]["/api/v1/imports"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    exports = schema["paths"]["/api/v1/exports"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert imports == {"$ref": "#/components/schemas/MemoryPackageRequest"}
    assert exports == {"$ref": "#/components/schemas/MemoryPackage"}
    # What import reads (export-only members are read-only, so not in the request), and what export writes.
    assert set(components["MemoryPackageRequest"]["properties"]) == {
        "format", "version", "exported_at", "banks", "revisions", "conversations",
    }  # fmt: skip
    assert set(components["MemoryPackage"]["properties"]) == set(MemoryPackage.model_fields)
    assert set(components["MemoryPackageBank"]["properties"]) == set(MemoryPackageBank.model_fields)
    note = components["MemoryPackageNote"]
    assert set(note["properties"]) == set(MemoryPackageNote.model_fields)
    assert set(note["required"]) == {"key", "description", "content", "id", "source", "repetitions"}
    assert {name for name, member in note["properties"].items() if member.get("readOnly")} == {
        "id", "source", "repetitions",
    }  # fmt: skip
