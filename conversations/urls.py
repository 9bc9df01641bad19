from django.urls import path

from conversations import api

urlpatterns = [
    path("turns", api.TurnCreateApi.as_view(), name="turns"),
    path("turns/<int:turn_id>/reply", api.TurnReplyApi.as_view(), name="turn-reply"),
    path("conversations", api.ConversationListCreateApi.as_view(), name="conversations"),
    path("conversations/import", api.ConversationImportApi.as_view(), name="conversations-import"),
    path(
        "conversations/imports/<int:import_id>",
        api.ConversationImportDetailApi.as_view(),
        name="conversations-import-detail",
    ),
    path("conversations/<int:conversation_id>", api.ConversationDetailApi.as_view(), name="conversation-detail"),
    path("conversations/<int:conversation_id>/end", api.ConversationEndApi.as_view(), name="conversation-end"),
    path("conversations/<int:conversation_id>/messages", api.MessageListCreateApi.as_view(), name="messages"),
    path(
        "conversations/<int:conversation_id>/messages/<int:message_id>",
        api.MessageDetailApi.as_view(),
        name="message-detail",
    ),
]
