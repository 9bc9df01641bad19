"""The lens's conversations: a person reads their conversations with each agent and erases a
message, or a whole conversation. Deleting here is erasure (conversations.services.erase_*).

What a login may see is what the Memory lens decides (memory.views.people_of): its own people, and
everyone in the teams it administers; anything else is a 404.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Q, QuerySet
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from accounts.models import Agent
from conversations.models import Conversation, Message, NoteSource
from conversations.services import erase_conversation, erase_message
from memory.views import LensRequest, people_of, requested_id, requested_page

CONVERSATIONS_PER_PAGE = 20
MESSAGES_PER_PAGE = 100


def _conversations(request: LensRequest) -> QuerySet[Conversation]:
    return Conversation.objects.filter(person__in=people_of(request)).select_related("agent", "person", "team")


@require_GET
@login_required
def conversation_list(request: LensRequest) -> HttpResponse:
    conversations = _conversations(request).annotate(
        message_count=Count("messages"), erased_count=Count("messages", filter=Q(messages__erased_at__isnull=False))
    )
    agents = Agent.objects.filter(conversations__in=_conversations(request)).distinct().order_by("name")
    agent = requested_id(request, "agent")
    if agent is not None:
        conversations = conversations.filter(agent_id=agent)
    page = requested_page(request, Paginator(conversations.order_by("-started_at", "-pk"), CONVERSATIONS_PER_PAGE))
    return render(request, "conversations/conversation_list.html", {"page": page, "agents": agents, "agent": agent})


@require_GET
@login_required
def conversation_detail(request: LensRequest, conversation_id: int) -> HttpResponse:
    conversation = get_object_or_404(_conversations(request), pk=conversation_id)
    rows = Message.objects.filter(team_id=conversation.team_id, conversation=conversation).order_by("order")
    page = requested_page(request, Paginator(rows, MESSAGES_PER_PAGE))
    return render(request, "conversations/conversation_detail.html", {"conversation": conversation, "page": page})


@require_http_methods(["GET", "POST"])
@login_required
def message_delete(request: LensRequest, conversation_id: int, message_id: int) -> HttpResponse:
    """GET asks for confirmation; POST erases the message (a tombstone stays in its place)."""
    conversation = get_object_or_404(_conversations(request), pk=conversation_id)
    message = get_object_or_404(
        Message.objects.filter(team_id=conversation.team_id, conversation=conversation, erased_at__isnull=True),
        pk=message_id,
    )
    if request.method == "GET":
        learned = NoteSource.objects.filter(team_id=message.team_id, message=message).select_related("note__bank")
        context = {"conversation": conversation, "message": message, "notes": [source.note for source in learned]}
        return render(request, "conversations/message_confirm_delete.html", context)
    erase_message(message=message)
    messages.success(request, "Deleted the message. Its place in the conversation says only that it was erased.")
    return redirect(reverse("lens-conversation", args=[conversation.pk]) + f"#message-{message.pk}")


@require_http_methods(["GET", "POST"])
@login_required
def conversation_delete(request: LensRequest, conversation_id: int) -> HttpResponse:
    """GET asks for confirmation; POST erases every message of the conversation and its summary."""
    conversation = get_object_or_404(_conversations(request), pk=conversation_id)
    if request.method == "GET":
        count = Message.objects.filter(team_id=conversation.team_id, conversation=conversation).count()
        return render(
            request, "conversations/conversation_confirm_delete.html", {"conversation": conversation, "count": count}
        )
    erased = erase_conversation(conversation=conversation)
    messages.success(request, f"Deleted the conversation: {erased} messages and its summary were erased.")
    return redirect("lens-conversations")
