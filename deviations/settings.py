"""Django settings, read from the environment.

No variables set gives the embedded default a newcomer runs: a SQLite file in the project
folder, Celery tasks executed in-process, email printed to the console. Setting
``DATABASE_URL`` (``sqlite:///path`` or ``postgres://user@host:5432/db``) and
``CELERY_BROKER_URL`` (``redis://host:6379/0``) switches to the real services; nothing else
changes (docs/architecture.md).
"""

import importlib.util
import os
import secrets
import time
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()



def _secret_key(path: Path) -> str:
    """A random key made on the first run and kept in ``path`` (mode 0600).

    It signs sessions and the unsubscribe links of alert emails: a constant default would
    let anyone forge them. Several processes starting at once agree on one file (O_EXCL).
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        for _ in range(50):  # another process may be writing it right now
            key = path.read_text().strip()
            if key:
                return key
            time.sleep(0.1)
        raise ImproperlyConfigured(
            f"{path} is empty: delete it or set DJANGO_SECRET_KEY"
        ) from None
    key = secrets.token_urlsafe(50)
    with os.fdopen(fd, "w") as stream:
        stream.write(key + "\n")
    return key


# Deployments set DJANGO_SECRET_KEY (the same in every process: web, worker, beat); the
# embedded default makes one per installation.
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="") or _secret_key(
    Path(env.str("DJANGO_SECRET_KEY_FILE", default=str(BASE_DIR / ".secret_key")))
)
DEBUG = env.bool("DJANGO_DEBUG", default=False)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

# --- HTTPS (production) -------------------------------------------------------------------
# DJANGO_HTTPS=1 when users reach the site over HTTPS (docs/deploy.md): redirects http to
# https, secure-only cookies, HSTS (DJANGO_HSTS_SECONDS, a year by default; 0 turns it off).
# Behind a proxy that terminates TLS, DJANGO_TRUST_X_FORWARDED_PROTO=1 lets Django see it.
# With DJANGO_HSTS_INCLUDE_SUBDOMAINS=1 and DJANGO_HSTS_PRELOAD=1 as well,
# `DJANGO_DEBUG=0 DJANGO_HTTPS=1 manage.py check --deploy` is clean (tested). The
# embedded default serves plain http on loopback and leaves all of this off.
HTTPS = env.bool("DJANGO_HTTPS", default=False)
SECURE_SSL_REDIRECT = HTTPS
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SECURE_HSTS_SECONDS = env.int("DJANGO_HSTS_SECONDS", default=365 * 24 * 3600 if HTTPS else 0)
# Both change how browsers treat the whole domain for a long time: opt in once every
# subdomain is served over HTTPS (check --deploy warns until then).
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("DJANGO_HSTS_PRELOAD", default=False)
if env.bool("DJANGO_TRUST_X_FORWARDED_PROTO", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# The cache counts failed logins across processes: the broker's Redis when there is one,
# else this process's memory (the embedded default is one process).
_BROKER = env.str("CELERY_BROKER_URL", default="")
CACHES = {"default": (
    {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": _BROKER,
     "KEY_PREFIX": "deviations"}
    if _BROKER.startswith(("redis://", "rediss://"))
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
)}
# Who may read: everyone (the default), or signed-in users and tokens only.
DEVIATIONS_LOGIN_REQUIRED = env.bool("DEVIATIONS_LOGIN_REQUIRED", default=False)
# Logins: after this many failed attempts for a user name, or from an address, within the
# window, the login page refuses further attempts until the window has passed.
LOGIN_FAILURES_ALLOWED = env.int("DEVIATIONS_LOGIN_FAILURES", default=5)
LOGIN_FAILURE_WINDOW = env.int("DEVIATIONS_LOGIN_WINDOW_SECONDS", default=15 * 60)

# django-ninja's folder, found without importing it: its templates and static files.
NINJA_DIR = Path(importlib.util.find_spec("ninja").origin).parent  # type: ignore[union-attr,arg-type]

INSTALLED_APPS = [
    # The admin without autodiscovery at set-up (deviations.apps.AdminConfig).
    "deviations.apps.AdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # Not "ninja": as an app it is imported with pydantic whenever Django starts (~0.25 s
    # of every CLI call). /api/docs serves the Swagger UI that django-ninja ships from our
    # own static files all the same (NINJA_DIR below, deviations.api.LocalSwagger; without
    # them ninja loads it from a CDN: a blank page offline).
    "deviations.apps.CoreConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "deviations.core.nul.RefuseNulMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "deviations.core.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "deviations.urls"
WSGI_APPLICATION = "deviations.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates", NINJA_DIR / "templates"],
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

DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # A connection kept for DJANGO_CONN_MAX_AGE seconds (60; 0: one per request, as
    # Django's default) saves each request, and each task of a Celery worker, PostgreSQL's
    # connection set-up: a new server process and authentication (~1 ms of a gunicorn
    # worker's CPU per matrix page, 3.3-3.8 instead of 4.6 ms, and the server's own;
    # docs/architecture.md, "Rendered pages and load"). ``?conn_max_age=N`` in DATABASE_URL
    # takes precedence. Checked before reuse, so a restarted server costs no request.
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("DJANGO_CONN_MAX_AGE", default=60))
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded default serves concurrent uploads (and the CLI ingests while the server
    # reads): WAL lets readers run beside the one writer; IMMEDIATE transactions take the
    # write lock when they begin, so two writers queue (up to the timeout) instead of one
    # failing with "database is locked" when its read turns into a write.
    DATABASES["default"].setdefault("OPTIONS", {}).update({
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL",
    })
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = env.path("DJANGO_STATIC_ROOT", default=BASE_DIR / "staticfiles")
STATICFILES_DIRS = [BASE_DIR / "static", NINJA_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "deviations.core.staticfinders.PlotlyFinder",  # plotly.js: npm's basic bundle, the full one
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Serve static files straight from their folders when collectstatic has not run (the embedded
# default); after collectstatic (docker-compose does it), compressed copies in STATIC_ROOT.
WHITENOISE_USE_FINDERS = True
# The local folder of the trace files (below) when no object storage is configured.
MEDIA_ROOT = env.path("DJANGO_MEDIA_ROOT", default=BASE_DIR / "media")

# --- Trace files --------------------------------------------------------------------------
# Every trace file sent (upload page, API, CLI) is kept whole under its sha256
# (deviations.traces.uploads.files): an upload waits there for a worker, then stays for the
# run page's download and `manage.py reingest`. Without DEVIATIONS_S3_BUCKET, in a folder
# of this machine (MEDIA_ROOT/traces/); with it, in S3-compatible object storage, which
# web and workers on different hosts reach without a shared filesystem (docs/deploy.md).
# Credentials come from boto3's usual sources: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY
# in the environment, its config files, or the machine's role.
DEVIATIONS_S3_BUCKET = env.str("DEVIATIONS_S3_BUCKET", default="")
if DEVIATIONS_S3_BUCKET:
    if importlib.util.find_spec("storages") is None:
        raise ImproperlyConfigured(
            "DEVIATIONS_S3_BUCKET is set but django-storages is not installed: "
            "pip install 'deviations[s3]'"
        )
    STORAGES["traces"] = {
        "BACKEND": "deviations.core.storage.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": DEVIATIONS_S3_BUCKET,
            # Another S3-compatible service (SeaweedFS, MinIO, Ceph...): its URL.
            "endpoint_url": env.str("DEVIATIONS_S3_ENDPOINT_URL", default="") or None,
            "region_name": env.str("DEVIATIONS_S3_REGION", default="") or None,
            # Objects under this prefix of the bucket (a bucket shared with other data).
            "location": env.str("DEVIATIONS_S3_PREFIX", default=""),
            # "path" for services that do not serve buckets as host names.
            "addressing_style": env.str("DEVIATIONS_S3_ADDRESSING_STYLE", default="") or None,
            "signature_version": "s3v4",
            "file_overwrite": True,  # names are digests: the same name holds the same bytes
            "default_acl": None,
        },
    }
else:
    STORAGES["traces"] = {"BACKEND": "deviations.core.storage.local.LocalStorage"}
# How long a trace file is kept after it was sent, in days: empty (the default) keeps
# files for as long as their run exists; 0 deletes a file once its run is ingested. The
# hourly task expire_trace_files deletes expired files; their runs keep their times and
# their pages say the file is gone.
_KEEP_DAYS = env.str("DEVIATIONS_KEEP_TRACE_DAYS", default="").strip().lower()
DEVIATIONS_KEEP_TRACE_DAYS: int | None = (
    None if _KEEP_DAYS in ("", "forever") else int(_KEEP_DAYS)
)
if DEVIATIONS_KEEP_TRACE_DAYS is not None and DEVIATIONS_KEEP_TRACE_DAYS < 0:
    raise ImproperlyConfigured("DEVIATIONS_KEEP_TRACE_DAYS must be 0 or more days, or empty")

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"

# Uploads above this many bytes are refused (compressed size), and a gzip trace may not
# inflate past it: 2 GiB holds ~15 M trace events.
DEVIATIONS_MAX_TRACE_BYTES = env.int("DEVIATIONS_MAX_TRACE_BYTES", default=2 * 1024**3)
# Django holds smaller uploads in memory; larger ones stream to a temporary file. The first
# handler cuts off a file larger than the limit while it arrives.
FILE_UPLOAD_HANDLERS = [
    "deviations.core.uploads.TraceSizeLimitHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]
FILE_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024**2
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024**2
# Pages keep the arrays they assembled from a stored analysis, per process, up to this many
# MB (deviations.core.memo; one view of 300 releases × 5,000 functions is ~100 MB); 0: off.
DEVIATIONS_PAGE_CACHE_MB = env.int("DEVIATIONS_PAGE_CACHE_MB", default=256)
# Memory (MB) one analysis may hold for its arrays: a series larger than this is analysed in
# chunks of functions (deviations.traces.analysis, issue 24), one after another in-process or
# as a chord of tasks over the worker pool. 1,024 MB fits a 2 GiB worker (its process with
# Django, NumPy and SciPy loaded takes ~0.2 GB; docs/deploy.md has the measured peaks).
DEVIATIONS_ANALYSIS_MEMORY_MB = env.float("DEVIATIONS_ANALYSIS_MEMORY_MB", default=1024)
# A worker process whose memory high-water mark passed this many MB during a task is
# replaced by a fresh process before its next task (Celery's worker_max_memory_per_child;
# the prefork pool, the default). Without it a process that ran a chunk of a large analysis
# or a large ingest keeps its heap (freed, not returned to the system) and the next task's
# arrays come on top: a worker that served a new release after chunks of a 2,000 × 20,000
# series reached 1,992 MB where the update alone takes 674 MB (docs/deploy.md). Default:
# the analysis budget; 0 turns it off.
DEVIATIONS_WORKER_MAX_MEMORY_MB = env.float("DEVIATIONS_WORKER_MAX_MEMORY_MB",
                                            default=DEVIATIONS_ANALYSIS_MEMORY_MB)

# --- Celery -------------------------------------------------------------------------------
# Without a broker, tasks run in-process, synchronously, when they are sent: the embedded
# default needs no Redis and no worker ("memory://" keeps Celery from looking for one; the
# host part keeps kombu from printing "No hostname was supplied").
CELERY_TASK_ALWAYS_EAGER = not env.str("CELERY_BROKER_URL", default="")
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="memory://localhost/")
CELERY_TASK_EAGER_PROPAGATES = True
# Results live in the database (Run.status), not in Celery; only the chunks of a chunked
# analysis keep theirs (in the broker's Redis, for an hour): a chord counts them to start
# its last step (deviations.traces.tasks.analyse_chunk).
CELERY_RESULT_BACKEND = _BROKER if _BROKER.startswith(("redis://", "rediss://")) else None
CELERY_RESULT_EXPIRES = 3600
CELERY_TASK_IGNORE_RESULT = True
# JSON only: a task message never carries pickled objects, only ids.
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Acknowledge after the task ran, so a worker killed mid-ingest leaves the message for another
# worker; tasks are idempotent (keyed by run id and status), so a second delivery is harmless.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# One long task per process at a time: an ingest holds a large trace in memory.
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# KiB (Celery's unit); None: never replaced for its memory (DEVIATIONS_WORKER_MAX_MEMORY_MB).
CELERY_WORKER_MAX_MEMORY_PER_CHILD = (int(DEVIATIONS_WORKER_MAX_MEMORY_MB * 1024)
                                      if DEVIATIONS_WORKER_MAX_MEMORY_MB > 0 else None)
# A 2 GiB trace ingests in well under a minute; ten minutes means something is stuck.
CELERY_TASK_SOFT_TIME_LIMIT = 10 * 60
CELERY_TASK_TIME_LIMIT = 11 * 60
# A worker holding a run renews its claim every quarter of this lease; a claim not renewed
# for a whole lease belongs to a dead worker, and the sweeper (beat, every minute) sends the
# run again: a killed ingest is redone within about lease + a minute, not after Redis's
# visibility timeout below.
DEVIATIONS_CLAIM_LEASE_SECONDS = env.int("DEVIATIONS_CLAIM_LEASE_SECONDS", default=90)
# Redis redelivers an unacknowledged message after this long; it must exceed the hard limit.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 15 * 60}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_TASK_DEFAULT_QUEUE", default="deviations")

# --- Email --------------------------------------------------------------------------------
if "EMAIL_URL" in env:
    vars().update(env.email_url("EMAIL_URL"))
else:
    EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="deviations@localhost")

# --- Histogram detection and alerts on a schedule (`celery -A deviations.celery beat`) -----
# Detection also runs after every ingest; the hourly pass picks up rule parameters edited
# in the admin. Links in alert emails (charts, unsubscribe) start with DEVIATIONS_SITE_URL.
CELERY_BEAT_SCHEDULE = {
    # Sweepers: the database records the work; a task message lost with a broker that was
    # down or restarted (it keeps nothing on disk) is sent again (deviations.core.queue).
    "requeue-pending-runs": {"task": "deviations.requeue_pending_runs", "schedule": 60},
    "analyse-stale-series": {"task": "deviations.analyse_stale_series", "schedule": 2 * 60},
    "detect-stale-probes": {"task": "deviations.detect_stale_probes", "schedule": 2 * 60},
    "detect-histogram-changes": {"task": "deviations.detect_histogram_changes",
                                 "schedule": 60 * 60},
    # Alert groups whose confirmation delay ran out (the rest are emailed after analyses).
    "notify-alert-groups": {"task": "deviations.notify_alert_groups", "schedule": 15 * 60},
    "send-alert-digests": {"task": "deviations.send_alert_digests", "schedule": 24 * 60 * 60},
    "update-stale-canaries": {"task": "deviations.update_stale_canaries", "schedule": 60},
    # Webhook deliveries whose next attempt is due (deviations.alerts.hooks.tasks).
    "deliver-due-webhooks": {"task": "deviations.deliver_due_webhooks", "schedule": 60},
    # Trace files past DEVIATIONS_KEEP_TRACE_DAYS, and files no run refers to.
    "expire-trace-files": {"task": "deviations.expire_trace_files", "schedule": 60 * 60},
}
# Without a broker (the embedded default) a thread of each server process runs this
# schedule in-process, starting with the sweepers when the server starts; one process per
# site at a time (deviations.core.beat). 0 turns it off.
DEVIATIONS_EMBEDDED_BEAT = env.bool("DEVIATIONS_EMBEDDED_BEAT", default=True)
DEVIATIONS_SITE_URL = env.str("DEVIATIONS_SITE_URL", default="http://127.0.0.1:8000")
# An alert still provisional (its verdict can change with the next releases) is emailed
# only after this long, so that a flag that flips back never reaches an inbox; confirmed
# alerts are emailed at once (deviations.alerts.notify).
DEVIATIONS_ALERT_CONFIRM_SECONDS = env.int("DEVIATIONS_ALERT_CONFIRM_SECONDS",
                                           default=24 * 3600)

# --- Outgoing webhooks (deviations.alerts.hooks; docs/deploy.md, "Outbound HTTP") ----------
# Attempts of one delivery (connection errors, timeouts, 5xx, 408/425/429 are retried; other
# 4xx are not), the first retry BACKOFF seconds later, each next one twice as late
# (30 s, 1, 2, 4, 8 min by default), each attempt's timeout.
DEVIATIONS_WEBHOOK_ATTEMPTS = env.int("DEVIATIONS_WEBHOOK_ATTEMPTS", default=6)
DEVIATIONS_WEBHOOK_BACKOFF_SECONDS = env.float("DEVIATIONS_WEBHOOK_BACKOFF_SECONDS", default=30)
DEVIATIONS_WEBHOOK_TIMEOUT_SECONDS = env.float("DEVIATIONS_WEBHOOK_TIMEOUT_SECONDS", default=10)
# Webhooks to private, loopback and link-local addresses: off, so that a user who adds a
# webhook cannot make the workers reach the internal network (SSRF); a site whose chat or
# bisect service runs inside its own network turns it on.
DEVIATIONS_WEBHOOK_ALLOW_PRIVATE = env.bool("DEVIATIONS_WEBHOOK_ALLOW_PRIVATE", default=False)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("DJANGO_LOG_LEVEL", default="WARNING")},
}
