"""Template filters for what the lens shows people (memory.plain)."""

from __future__ import annotations

from django import template

from memory import plain

register = template.Library()


@register.filter
def note_words(content: str) -> str:
    """A note's content as a person reads it (memory.plain.note_text)."""
    return plain.note_text(content)
