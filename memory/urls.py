from django.urls import path

from memory import api, read_api
from memory.tools import REGISTRY

urlpatterns = [
    path("tools", api.ToolListApi.as_view(), name="tools-list"),
    *[path(f"tools/{name}", api.tool_view(tool).as_view(), name=f"tool-{name}") for name, tool in REGISTRY.items()],
    path("notes", api.NoteListApi.as_view(), name="notes-list"),
    path("notes/<int:note_id>", api.NoteDetailApi.as_view(), name="notes-detail"),
    path("banks", api.BankListApi.as_view(), name="banks-list"),
    path("banks/<path:bank_id>", api.BankDetailApi.as_view(), name="banks-detail"),
    path("revisions", api.RevisionListApi.as_view(), name="revisions-list"),
    path("imports", api.ImportApi.as_view(), name="imports"),
    path("exports", api.ExportApi.as_view(), name="exports"),
    path("reads", read_api.ReadListApi.as_view(), name="reads-list"),
    path("mutes", api.MuteListApi.as_view(), name="mutes-list"),
    path("mutes/<int:mute_id>", api.MuteDetailApi.as_view(), name="mutes-detail"),
    path("proposals", api.ProposalListApi.as_view(), name="proposals-list"),
    path("proposals/<int:proposal_id>/approve", api.ProposalApproveApi.as_view(), name="proposals-approve"),
    path("proposals/<int:proposal_id>/reject", api.ProposalRejectApi.as_view(), name="proposals-reject"),
]
