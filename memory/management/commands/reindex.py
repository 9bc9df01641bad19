from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memory.embedders import get_embedder
from memory.indexing import reconcile, stale_notes


class Command(BaseCommand):
    help = "Embed every note whose vector is missing, stale (content changed) or of another model."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=64)
        parser.add_argument("--limit", type=int, default=None, help="At most this many notes (default: all).")

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
