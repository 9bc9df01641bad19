from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"

    def ready(self) -> None:
        # Imported once the app registry is ready, as Django asks of ready(); apps.py loads before it.
        # Registers recent_messages and search_conversation beside the memory tools.
        from conversations import tools  # noqa: F401
        from conversations.indexing import MESSAGES
        from conversations.provenance import resolve_tool_sources
        from memory.indexing import register
        from memory.provenance import register_resolver

        register(MESSAGES)  # the vector index (memory.indexing) embeds messages too
        register_resolver(resolve_tool_sources)  # the memory tools' source_messages and turn
