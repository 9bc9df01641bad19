from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"

    def ready(self) -> None:
        # Imported once the app registry is ready, as Django asks of ready(); apps.py loads before it.
        from memory.embedders import validate_configuration
        from memory.indexing import NOTES, register

        # A wrong or unavailable embedder is a start-up error, never a silent fallback.
        validate_configuration()
        register(NOTES)

        # The retrieval audit writes the reads a request recorded once its response is sent. Django
        # calls receivers in the order they connected, and close_old_connections (connected by
        # Django itself) would otherwise run first and leave the flush a connection nobody closes.
        from django.core import signals
        from django.core.signals import request_finished
        from django.db import close_old_connections

        from memory.indexing import defer_dispatch, send_outbox
        from memory.services.reads import flush_reads

        request_finished.connect(flush_reads, dispatch_uid="memory.flush_reads")
        # The embedding tasks a request's writes ask for are queued after its response (memory.indexing).
        signals.request_started.connect(defer_dispatch, dispatch_uid="memory.indexing.defer_dispatch")
        request_finished.connect(send_outbox, dispatch_uid="memory.indexing.send_outbox")
        if request_finished.disconnect(close_old_connections):
            request_finished.connect(close_old_connections)
