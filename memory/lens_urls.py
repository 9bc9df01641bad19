from django.urls import path

from memory import read_views, views

urlpatterns = [
    path("lens/", views.lens, name="lens"),
    path("lens/mute", views.category_mute, name="lens-mute"),
    path("lens/unmute", views.category_unmute, name="lens-unmute"),
    path("lens/reads/", read_views.reads_page, name="lens-reads"),
    path("m/<int:note_id>", views.note_detail, name="lens-note"),
    path("m/<int:note_id>/edit", views.note_edit, name="lens-note-edit"),
    path("m/<int:note_id>/delete", views.note_delete, name="lens-note-delete"),
    path("lens/people/<int:person_id>/erase", views.person_erase, name="lens-person-erase"),
]
