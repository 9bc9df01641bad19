from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"

    def ready(self) -> None:
        # Imported once the app registry is ready, as Django asks of ready(); apps.py loads before it.
        # Registers recent_messages and search_conversation beside the memory tools.
        from conversations import tools  # noqa: F401
        from conversations.indexing import MESSAGES
        from conversations.person_data import CONVERSATIONS
        from conversations.provenance import ConversationProvenance
        from memory import person_data
        from memory.indexing import register
        from memory.provenance import register_backend

        register(MESSAGES)  # the vector index (memory.indexing) embeds messages too
        register_backend(ConversationProvenance())  # sources of tool writes; origins and erasure in the lens
        person_data.register(CONVERSATIONS)  # whole-person export, import and erasure include conversations
