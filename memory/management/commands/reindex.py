from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memory.embedders import Embedder, get_embedder
from memory.indexing import IndexedModel, indexed_models


class Command(BaseCommand):
    help = (
        "Embed every row of every indexed model (notes, then messages) whose vector is missing, stale "
        "(text changed) or of another model."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=64)
        parser.add_argument(
            "--limit", type=int, default=None, help="At most this many rows of each indexed model (default: all)."
        )

    def handle(self, *args: object, batch_size: int, limit: int | None, **options: object) -> None:
        embedder = get_embedder()
        if embedder is None:
            raise CommandError("No embedder is configured (EMBEDDER=none); there is nothing to index with.")
        for indexed in indexed_models():
            self.reindex(indexed, embedder, batch_size=batch_size, limit=limit)

    def reindex(self, indexed: IndexedModel, embedder: Embedder, *, batch_size: int, limit: int | None) -> None:
        label = indexed.label
        total = indexed.stale(embedder).count()
        if limit is not None:
            total = min(total, limit)
        self.stdout.write(f"{total} {label}(s) to index with {embedder.model} ({embedder.dim} dimensions).")
        with tqdm(total=total, unit=label, disable=total == 0) as bar:
            report = indexed.reconcile(batch_size=batch_size, limit=limit, progress=bar.update)
        if report.error:
            raise CommandError(
                f"Indexed {report.indexed} of {report.checked} {label}(s); stopped: {report.error}. "
                "Run this again once the embedder is back."
            )
        self.stdout.write(self.style.SUCCESS(f"Indexed {report.indexed} {label}(s)."))
