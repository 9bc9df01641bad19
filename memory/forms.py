"""Forms of the Memory lens. They only shape input; caps and every other rule live in the write path,
so an over-cap edit reaches edit_note and is refused there (and logged) with its own message."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.core.validators import ProhibitNullCharactersValidator
from django.db.models import QuerySet

from accounts.models import Agent, Person


class WritePathCharField(forms.CharField):
    """A CharField that leaves NUL to the write path: Django's own validator would refuse it in the
    form, where the refusal is not logged; edit_note refuses it too, and logs it as a refusal."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators = [v for v in self.validators if not isinstance(v, ProhibitNullCharactersValidator)]


class NoteEditForm(forms.Form):
    description = WritePathCharField(label="Description", help_text="One line that says what the note is about.")
    # strip=False: what the person typed is what is saved (or refused), never silently trimmed.
    content = WritePathCharField(label="Content", strip=False, widget=forms.Textarea(attrs={"rows": 8}))

    def clean_content(self) -> str:
        # Browsers submit textarea line breaks as CRLF; notes store plain newlines, and the cap
        # counts characters the way every other writer sends them.
        content: str = self.cleaned_data["content"]
        return content.replace("\r\n", "\n")


class CategoryMuteForm(forms.Form):
    """Who mutes (one of the signed-in login's people), for which agent of that person's team, what."""

    person = forms.ModelChoiceField(queryset=Person.objects.none())
    agent = forms.ModelChoiceField(queryset=Agent.objects.none())
    category = forms.CharField(max_length=64)

    def __init__(self, *args: Any, people: QuerySet[Person], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast("forms.ModelChoiceField[Person]", self.fields["person"]).queryset = people
        agents = Agent.objects.filter(team__in=people.values("team"))
        cast("forms.ModelChoiceField[Agent]", self.fields["agent"]).queryset = agents

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        person, agent = cleaned.get("person"), cleaned.get("agent")
        if person is not None and agent is not None and agent.team_id != person.team_id:
            raise forms.ValidationError("That agent is not in this person's team.")
        return cleaned


ERASE_EVERYTHING_PHRASE = "delete everything"


class ErasePersonForm(forms.Form):
    """Erasing everything about a person cannot be undone, so the person types what they mean."""

    confirmation = forms.CharField(
        label=f"Type “{ERASE_EVERYTHING_PHRASE}” to confirm", max_length=100, strip=True, required=True
    )

    def clean_confirmation(self) -> str:
        typed: str = self.cleaned_data["confirmation"]
        if typed.lower() != ERASE_EVERYTHING_PHRASE:
            raise forms.ValidationError(f"Type “{ERASE_EVERYTHING_PHRASE}” exactly; nothing was deleted.")
        return typed


class ReviewWritesForm(forms.Form):
    """Review on or off: whether what agents learn about the person waits for their approval."""

    review = forms.ChoiceField(choices=[("on", "on"), ("off", "off")])


class KeepProposalForm(forms.Form):
    """Keep a proposal as it is (no content sent), or with the person's own words ("Edit and keep")."""

    content = WritePathCharField(required=False, strip=False)

    def clean_content(self) -> str | None:
        if "content" not in self.data:
            return None
        content: str = self.cleaned_data["content"].replace("\r\n", "\n")
        if not content.strip():
            raise forms.ValidationError("Write what to keep, or choose Don't keep.")
        return content
