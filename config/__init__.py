import os

# One BLAS thread per process, unless the environment says otherwise. A search's vector products
# are small (5,000 x 384 takes 0.1 ms on one thread), and OpenBLAS keeps its extra threads spinning
# for work after each, on cores the embedding thread and Postgres need: with two threads, a
# typical person's turn had p95 21-24 ms instead of 14-19 (bench/bench_compose.py sizes, 2 cores).
# Read when numpy loads, so it is set here, before anything imports numpy.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from config.celery import app as celery_app

__all__ = ("celery_app",)
