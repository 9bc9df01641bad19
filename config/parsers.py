"""The API's one JSON parser: the boundary where every request body is checked before any view sees it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import exceptions, parsers

from config.text import MAX_JSON_DEPTH, find_unstorable


class JSONParser(parsers.JSONParser):
    """DRF's strict JSON parser (no NaN or Infinity), plus what no field of Mnemo can take.

    Text Postgres cannot store (NUL, lone surrogates) and other control characters, numbers out
    of range and documents nested too deeply are refused here with 400 `invalid` naming the field.
    """

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:  # the C decoder gives up past about a thousand levels
            raise exceptions.ParseError(
                f"JSON parse error - the document is nested more than {MAX_JSON_DEPTH} levels deep; send a flatter one."
            ) from None
        if (problem := find_unstorable(data)) is not None:
            raise RefusedDocument({problem.field: [problem.message]}, document=data)
        return data


class RefusedDocument(exceptions.ValidationError):
    """A body that parsed but holds what no field can take. It keeps the document, so that a
    refused write can still be logged (escaped) with what was attempted."""

    def __init__(self, detail: Any, *, document: Any) -> None:
        super().__init__(detail)
        self.document = document
