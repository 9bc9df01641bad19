"""Messages in the vector index (memory.indexing): the meaning half of the conversation search.

Registered from ConversationsConfig.ready. `record_message` calls `MESSAGES.schedule`; the
embedding runs after commit in conversations.tasks.embed_messages.
"""

from __future__ import annotations

from django.db.models import Q

from conversations.models import Message, MessageVector
from memory.indexing import IndexedModel

MESSAGES = IndexedModel(
    label="message",
    model=Message,
    vector_model=MessageVector,
    row_field="message",
    text_fields=("content",),
    task="conversations.tasks.embed_messages",
    # Messages are not edited, so a vector is current as long as its model and width are.
    # store_if_current still compares the text: an erased or rewritten message never gets the
    # vector of what it used to say.
    hashes_text=False,
    skip=Q(erased_at__isnull=False),  # a tombstone has no text to embed
)
