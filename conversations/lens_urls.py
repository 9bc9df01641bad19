from django.urls import path

from conversations import lens_views

urlpatterns = [
    path("lens/conversations/<int:conversation_id>", lens_views.conversation_detail, name="lens-conversation"),
]
