from django.urls import path

from memory import as_of_views, read_views, review_views, views

urlpatterns = [
    path("lens/", views.lens, name="lens"),
    path("lens/mute", views.category_mute, name="lens-mute"),
    path("lens/unmute", views.category_unmute, name="lens-unmute"),
    path("lens/reads/", read_views.reads_page, name="lens-reads"),
    path("lens/as-of/", as_of_views.lens_as_of, name="lens-as-of"),
    path("m/<int:note_id>", views.note_detail, name="lens-note"),
    path("m/<int:note_id>/edit", views.note_edit, name="lens-note-edit"),
    path("m/<int:note_id>/mute", views.note_mute, name="lens-note-mute"),
    path("m/<int:note_id>/unmute", views.note_unmute, name="lens-note-unmute"),
    path("m/<int:note_id>/delete", views.note_delete, name="lens-note-delete"),
    path("m/<int:note_id>/as-of", as_of_views.note_as_of, name="lens-note-as-of"),
    path("lens/people/<int:person_id>/erase", views.person_erase, name="lens-person-erase"),
    path("lens/people/<int:person_id>/review", review_views.review_writes, name="lens-review-writes"),
    path("lens/proposals/<int:proposal_id>/keep", review_views.proposal_keep, name="lens-proposal-keep"),
    path("lens/proposals/<int:proposal_id>/reject", review_views.proposal_reject, name="lens-proposal-reject"),
]
