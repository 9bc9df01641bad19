from django.urls import path

from conversations import views

urlpatterns = [
    path("lens/conversations/", views.conversation_list, name="lens-conversations"),
    path("lens/conversations/<int:conversation_id>", views.conversation_detail, name="lens-conversation"),
    path("lens/conversations/<int:conversation_id>/delete", views.conversation_delete, name="lens-conversation-delete"),
    path(
        "lens/conversations/<int:conversation_id>/messages/<int:message_id>/delete",
        views.message_delete,
        name="lens-message-delete",
    ),
]
