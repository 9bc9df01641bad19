from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memory.embedders import Embedder, get_embedder
from memory.indexing import reconcile, stale_notes


class Command(BaseCommand):
    help = "Embed every note whose vector is missing, stale (content changed) or of another model, then every message without a current vector."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=64)
        parser.add_argument(
            "--limit", type=int, default=None, help="At most this many notes, and as many messages (default: all)."
        )

    def handle(self, *args: object, batch_size: int, limit: int | None, **options: object) -> None:
        embedder = get_embedder()
        if embedder is None:
            raise CommandError("No embedder is configured (EMBEDDER=none); there is nothing to index with.")
        total = stale_notes(embedder).count()
        if limit is not None:
            total = min(total, limit)
        self.stdout.write(f"{total} note(s) to index with {embedder.model} ({embedder.dim} dimensions).")
        with tqdm(total=total, unit="note", disable=total == 0) as bar:
            report = reconcile(batch_size=batch_size, limit=limit, progress=bar.update)
        if report.error:
            raise CommandError(
                f"Indexed {report.indexed} of {report.checked}; stopped: {report.error}. "
                "Run this again once the embedder is back."
            )
        self.stdout.write(self.style.SUCCESS(f"Indexed {report.indexed} note(s)."))
        self.reindex_messages(embedder, batch_size=batch_size, limit=limit)

    def reindex_messages(self, embedder: Embedder, *, batch_size: int, limit: int | None) -> None:
        """Conversation messages too: the meaning half of the conversation search. (Imported here:
        conversations builds on memory, not the other way round.)"""
        from conversations.indexing import reconcile as reconcile_messages
        from conversations.indexing import stale_messages

        total = stale_messages(embedder).count()
        if limit is not None:
            total = min(total, limit)
        self.stdout.write(f"{total} message(s) to index with {embedder.model} ({embedder.dim} dimensions).")
        with tqdm(total=total, unit="message", disable=total == 0) as bar:
            report = reconcile_messages(batch_size=batch_size, limit=limit, progress=bar.update)
        if report.error:
            raise CommandError(
                f"Indexed {report.indexed} of {report.checked} messages; stopped: {report.error}. "
                "Run this again once the embedder is back."
            )
        self.stdout.write(self.style.SUCCESS(f"Indexed {report.indexed} message(s)."))
