"""`make bench`: run every benchmark against a scratch database on the embedded (or given) Postgres."""

from __future__ import annotations

import os
import sys
import uuid


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    import logging

    from django.db import connection
    from django.test.utils import setup_test_environment

    from bench import bench_api, bench_memory, bench_vectors

    logging.getLogger("django.request").setLevel(logging.ERROR)  # 4xx paths are measured, not news
    setup_test_environment()
    # A throwaway database, like the test suite's: benchmarks never touch the main data.
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        suffix = uuid.uuid4().hex[:6]
        bench_api.run(f"bench-{suffix}")
        bench_memory.run(f"bench-memory-{suffix}")
        bench_vectors.run(f"bench-vectors-{suffix}")
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
