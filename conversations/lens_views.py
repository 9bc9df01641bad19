"""The lens's read-only page of one conversation, so a person can follow what an agent's lookup
found ("What agents looked up about you" links here). Who may open it is decided as for the rest
of the lens (memory.views.people_of): the person it was with, and the admins of their team;
anyone else gets 404.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from conversations.models import Conversation
from memory.views import LensRequest, people_of

MESSAGES_SHOWN = 200  # the newest; the page says how many are older


@require_GET
@login_required
def conversation_detail(request: LensRequest, conversation_id: int) -> HttpResponse:
    conversations = Conversation.objects.filter(person__in=people_of(request)).select_related(
        "agent", "person", "person__team"
    )
    conversation = get_object_or_404(conversations, pk=conversation_id)
    messages = conversation.messages.filter(team_id=conversation.team_id)
    total = messages.count()
    shown = list(messages.order_by("-order")[:MESSAGES_SHOWN])[::-1]
    context = {"conversation": conversation, "messages": shown, "older": total - len(shown)}
    return render(request, "conversations/conversation.html", context)
