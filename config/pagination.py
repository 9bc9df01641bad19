"""The pagination of every API list: limit/offset that refuse what they cannot honour.

DRF's LimitOffsetPagination trims a limit over max_limit to the maximum and quietly falls back to
the default for anything it cannot read (limit=1e20, limit=-1, offset=null, limit=²). A client
then gets a different page from the one it asked for without being told; here it gets a 400 that
names the parameter and what it accepts.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import exceptions
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

from config.text import INT64_MAX, ascii_number

# Far beyond any list a team holds; it only keeps the number a number the database can take.
MAX_OFFSET = 1_000_000_000


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    default_limit: int  # PAGE_SIZE, which config.settings always sets

    def get_limit(self, request: Request) -> int:
        maximum = settings.API_MAX_PAGE_SIZE
        raw = request.query_params.get(self.limit_query_param)
        if raw is None:
            return min(self.default_limit, maximum)
        limit = ascii_number(raw, maximum=INT64_MAX)
        if limit is None or limit < 1:
            raise exceptions.ValidationError(
                {self.limit_query_param: [f"Use a whole number from 1 to {maximum}, in plain digits."]}
            )
        if limit > maximum:
            raise exceptions.ValidationError(
                {self.limit_query_param: [f"The most a page holds is {maximum}; ask for more pages with offset."]}
            )
        return limit

    def get_offset(self, request: Request) -> int:
        raw = request.query_params.get(self.offset_query_param)
        if raw is None:
            return 0
        offset = ascii_number(raw, maximum=MAX_OFFSET)
        if offset is None:
            raise exceptions.ValidationError(
                {self.offset_query_param: [f"Use a whole number from 0 to {MAX_OFFSET}, in plain digits."]}
            )
        return offset

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        bounds = {
            self.limit_query_param: {"minimum": 1, "maximum": settings.API_MAX_PAGE_SIZE},
            self.offset_query_param: {"minimum": 0, "maximum": MAX_OFFSET},
        }
        for parameter in parameters:
            parameter["schema"] = {**parameter["schema"], **bounds.get(parameter["name"], {})}
        return parameters
