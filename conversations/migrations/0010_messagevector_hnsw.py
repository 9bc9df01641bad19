"""An HNSW index over messages' vectors of the local models' width (384), for the approximate
path of the conversation search (conversations.retrieval).

The vector column has no fixed width (vectors of several models may live side by side), so the
index is on the column cast to vector(384), for the rows of that width only. On a large table
the build takes a while (about 30 s per 100,000 vectors on 2 cores) and blocks writes to the
table meanwhile; build it beforehand with CREATE INDEX CONCURRENTLY (the same statement) to
avoid that: this migration then finds it and does nothing.
"""

from django.db import migrations

INDEX = "messagevector_embedding_384_hnsw"

CREATE = f"""
CREATE INDEX IF NOT EXISTS {INDEX} ON conversations_messagevector
USING hnsw ((embedding::vector(384)) vector_cosine_ops) WITH (m = 16, ef_construction = 64)
WHERE dim = 384
"""


class Migration(migrations.Migration):
    dependencies = [("conversations", "0009_message_language")]

    operations = [migrations.RunSQL(CREATE, reverse_sql=f"DROP INDEX IF EXISTS {INDEX}")]
