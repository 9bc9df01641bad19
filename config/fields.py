"""DRF input fields held to the boundary's rules (config.text)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from config.text import INT64_MAX, TextKind, TextValidator


class IntegerField(serializers.IntegerField):
    """An integer written with ASCII digits: DRF's own reads "٣" as 3, because int() takes any Unicode digit."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_value", INT64_MAX)
        kwargs.setdefault("min_value", -INT64_MAX)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, str) and not data.isascii():
            self.fail("invalid")
        return super().to_internal_value(data)


class IdentifierField(serializers.CharField):
    """A person id, scope or other name: one line, no control or bidirectional characters."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)  # a trailing line break is refused, not trimmed away
        super().__init__(**kwargs)
        self.validators.append(TextValidator(TextKind.IDENTIFIER))


class LineField(serializers.CharField):
    """One line of text (a display name): no control characters or line breaks."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators.append(TextValidator(TextKind.LINE))


class TextField(serializers.CharField):
    """Free text (a message): tab and line breaks allowed, no other control character."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)
        self.validators.append(TextValidator(TextKind.TEXT))
