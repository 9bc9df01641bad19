"""The embedders: the local ONNX model, the OpenAI-compatible client (against a local server), hashing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from memory.embedders import EmbeddingUnavailable, HashingEmbedder, LocalMiniLM, OpenAIEmbedder
from tests.memory.embedding_server import Behaviour, embedding_server
from tests.support.fixtures import ROOT


@pytest.fixture(scope="module")
def local_model() -> LocalMiniLM:
    return LocalMiniLM()


def test_local_model_embeds_meaning_offline_without_torch(local_model):
    vectors = local_model.embed(
        ["My cat loves sleeping on the sofa", "where does the kitten nap?", "The quarterly invoice is overdue"]
    )
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > 0.5
    assert vectors[0] @ vectors[2] < 0.2
    assert "torch" not in sys.modules


def test_local_model_pads_per_batch_and_agrees_with_single_inputs(local_model):
    texts = ["short", "a considerably longer sentence about moving from Oslo to Bergen in the spring"]
    batch = local_model.embed(texts)
    singles = np.vstack([local_model.embed([t]) for t in texts])
    assert np.all(np.sum(batch * singles, axis=1) > 0.9999)


def test_local_model_accepts_text_beyond_its_window(local_model):
    vector = local_model.embed(["word " * 2000])
    assert vector.shape == (1, 384)
    assert np.isfinite(vector).all()


def test_hashing_embedder_is_deterministic_and_normalised():
    embedder = HashingEmbedder(dim=64)
    first, again, empty = embedder.embed(["Ada lives in Oslo", "Ada lives in Oslo", ""])
    assert np.array_equal(first, again)
    assert np.isclose(np.linalg.norm(first), 1.0)
    assert np.isclose(np.linalg.norm(empty), 1.0)
    assert embedder.model == "hashing-v1-64"


# A local server that must answer gets a generous deadline; the timeout tests set their own short one.
def client(url: str, dim: int = 8, timeout: float = 30.0) -> OpenAIEmbedder:
    return OpenAIEmbedder(base_url=url, model="test-embed", dim=dim, api_key="sk-test", timeout=timeout)


def test_openai_client_returns_normalised_vectors_in_input_order():
    behaviour = Behaviour(dim=8)
    with embedding_server(behaviour) as url:
        vectors = client(url).embed(["one", "two", "three"])
    assert vectors.shape == (3, 8)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    from tests.memory.embedding_server import fake_vector

    expected = np.array(fake_vector("two", 8))
    assert np.allclose(vectors[1], expected / np.linalg.norm(expected), atol=1e-6)
    assert behaviour.requests[0] == {"model": "test-embed", "input": ["one", "two", "three"]}
    assert behaviour.headers[0]["Authorization"] == "Bearer sk-test"


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("429", "rate limiting"),
        ("500", "failed with 500"),
        ("refuse", "refused the request (400)"),
        ("wrong_width", "expected (2, 8)"),
        ("malformed", "malformed body"),
    ],
)
def test_openai_client_failure_modes_raise_embedding_unavailable(mode, message):
    with embedding_server(Behaviour(mode=mode)) as url, pytest.raises(EmbeddingUnavailable, match=re.escape(message)):
        client(url).embed(["one", "two"])


def test_openai_client_times_out():
    with (
        embedding_server(Behaviour(mode="slow", delay=1.5)) as url,
        pytest.raises(EmbeddingUnavailable, match="timed out"),
    ):
        client(url, timeout=0.3).embed(["one"])


def test_openai_client_reports_an_unreachable_endpoint():
    with pytest.raises(EmbeddingUnavailable, match="unreachable"):
        client("http://127.0.0.1:9/v1", timeout=0.5).embed(["one"])


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"EMBEDDER": "openai"}, "EMBEDDER=openai needs EMBEDDING_BASE_URL and EMBEDDING_MODEL"),
        ({"EMBEDDER": "openai", "EMBEDDING_BASE_URL": "http://x/v1", "EMBEDDING_MODEL": "m"}, "needs EMBEDDING_DIM"),
        ({"EMBEDDER": "word2vec"}, "EMBEDDER='word2vec' is not one of"),
        ({"VECTOR_FLOOR": "0.6", "VECTOR_STRONG": "0.5"}, "must be above VECTOR_FLOOR"),
    ],
)
def test_a_wrong_embedder_configuration_is_a_startup_error(env, message):
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode != 0
    assert message in result.stderr


def test_local_model_returns_rows_in_the_callers_order_whatever_their_lengths(local_model):
    texts = ["a much longer sentence about sailing between the islands off Bergen in the summer", "cat", "dog bark"]
    together = local_model.embed(texts, batch_size=2)
    alone = np.vstack([local_model.embed([t]) for t in texts])
    assert np.all(np.sum(together * alone, axis=1) > 0.9999)


def test_a_text_gets_the_same_vector_whatever_it_is_embedded_beside(local_model):
    # The 8-bit session quantises a run's activations with one scale for the run: texts run
    # together would pull each other's vectors (to a cosine of 0.976 for "cat"). One text per run.
    local_model.warm_up()
    texts = ["a much longer sentence about sailing between the islands off Bergen in the summer", "cat", "dog bark"]
    together = local_model.embed(texts)
    alone = np.vstack([local_model.embed([t]) for t in texts])
    assert np.array_equal(together, alone)
    assert np.array_equal(together[1], local_model.embed(["cat", "a cat", "the cat sat on the mat"])[0])


SEARCH_TEXTS = [
    "When did Caroline go to the support group?",
    "hi",
    "What is my sister's favourite kind of music, and where did she study it before moving to Bergen?",
    "Где живёт моя сестра?",
]


def test_local_model_embeds_stored_and_search_texts_through_its_8_bit_copy_close_to_the_reference(local_model):
    local_model.warm_up()
    stored = local_model.embed(SEARCH_TEXTS)
    searched = np.vstack([local_model.embed_query(text) for text in SEARCH_TEXTS])
    reference = local_model.embed_reference(SEARCH_TEXTS)
    assert stored.dtype == searched.dtype == np.float32
    assert np.allclose(np.linalg.norm(stored, axis=1), 1.0, atol=1e-5)
    # One session for both kinds of text: a question finds the very vector its text was stored with.
    assert np.array_equal(stored, searched)
    agreement = np.sum(stored * reference, axis=1)
    # Close to the reference vectors, and not them: the session is the 8-bit copy.
    assert np.all(agreement > 0.95), agreement
    assert agreement.mean() > 0.98, agreement
    assert np.all(agreement < 0.99999), agreement
    # Each text is still nearer its own reference vector than any other text's.
    assert np.array_equal(np.argmax(stored @ reference.T, axis=1), np.arange(len(SEARCH_TEXTS)))


def test_two_search_texts_are_embedded_at_once(local_model):
    local_model.warm_up()
    session = local_model._quick
    both_inside = threading.Barrier(2, timeout=10)  # broken unless two runs are in the session together

    class Together:
        def run(self, *args, **kwargs):
            both_inside.wait()
            return session.run(*args, **kwargs)

    local_model._quick = Together()
    try:
        with ThreadPoolExecutor(2) as pool:
            vectors = list(pool.map(local_model.embed_query, ["What did I cook?", "What did I cook on 9 May?"]))
    finally:
        local_model._quick = session
    assert not both_inside.broken
    assert np.array_equal(vectors[0], local_model.embed_query("What did I cook?"))


def test_until_the_8_bit_copy_is_ready_texts_go_through_the_reference_session(tmp_path, settings):
    settings.DATA_DIR = tmp_path
    model = LocalMiniLM()
    # The first text does not wait for the copy to be built: it is embedded the reference way.
    first = model.embed([SEARCH_TEXTS[0]])[0]
    assert np.allclose(first, model.embed_reference([SEARCH_TEXTS[0]])[0], atol=1e-6)
    model.warm_up()
    assert model.embed_query(SEARCH_TEXTS[0]) @ first < 0.99999
    assert model.embed([SEARCH_TEXTS[0]])[0] @ first < 0.99999


def models_in(directory):
    return sorted(p.name for p in directory.iterdir() if p.suffix == ".onnx")


def test_the_8_bit_copy_is_built_once_and_reused(tmp_path, settings):
    settings.DATA_DIR = tmp_path
    killed = tmp_path / "models" / ".building-killed"  # what a build killed half-way leaves
    killed.mkdir(parents=True)
    (killed / "folded.onnx").write_bytes(b"half a model")
    first = LocalMiniLM()
    first.warm_up()
    (built,) = models_in(tmp_path / "models")
    assert not killed.exists()
    stamp = (tmp_path / "models" / built).stat().st_mtime_ns
    second = LocalMiniLM()
    second.warm_up()
    assert np.array_equal(second.embed_query("where is Oslo"), first.embed_query("where is Oslo"))
    assert (tmp_path / "models" / built).stat().st_mtime_ns == stamp
    assert not list((tmp_path / "models").glob(".building-*"))


def test_a_damaged_copy_is_built_again(tmp_path, settings, caplog):
    settings.DATA_DIR = tmp_path
    LocalMiniLM().warm_up()
    (built,) = models_in(tmp_path / "models")
    (tmp_path / "models" / built).write_bytes(b"not a model")
    model = LocalMiniLM()
    with caplog.at_level("WARNING", logger="memory.embedders"):
        model.warm_up()
    assert "could not be loaded; building it again" in caplog.text
    assert "not using the 8-bit copy" not in caplog.text
    assert model.embed([SEARCH_TEXTS[0]])[0] @ model.embed_reference([SEARCH_TEXTS[0]])[0] < 0.99999


def test_processes_starting_together_build_one_copy_and_both_use_it(tmp_path):
    script = (
        "import django; django.setup(); from memory.embedders import LocalMiniLM; m = LocalMiniLM(); m.warm_up();"
        "q = m.embed(['where is Oslo'])[0]; r = m.embed_reference(['where is Oslo'])[0]; print(float(q @ r))"
    )
    env = {
        **os.environ,
        "MNEMO_DATA_DIR": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "MNEMO_EMBEDDED_AUTOSTART": "0",  # nothing here needs the database or Redis
        "SECRET_KEY": "test-only-secret-key-for-two-processes",
    }
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", script], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = [run.communicate(timeout=180) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    for out, err in outputs:
        assert 0.95 < float(out.strip().splitlines()[-1]) < 0.99999, (out, err)  # the 8-bit copy, in both
        assert "not using the 8-bit copy" not in err
    assert len(models_in(tmp_path / "models")) == 1
    assert not list((tmp_path / "models").glob(".building-*"))
    assert not (tmp_path / "pgdata").exists()


def test_without_its_8_bit_copy_the_model_embeds_texts_the_reference_way_and_says_why(tmp_path, settings, caplog):
    (tmp_path / "models").write_text("a file where the directory should be")
    settings.DATA_DIR = tmp_path
    model = LocalMiniLM()
    with caplog.at_level("WARNING", logger="memory.embedders"):
        model.warm_up()
    reference = model.embed_reference([SEARCH_TEXTS[0]])[0]
    assert np.allclose(model.embed_query(SEARCH_TEXTS[0]), reference, atol=1e-6)
    assert np.allclose(model.embed([SEARCH_TEXTS[0]])[0], reference, atol=1e-6)
    assert "not using the 8-bit copy" in caplog.text
    assert str(tmp_path / "models") in caplog.text


def test_an_8_bit_copy_that_strays_from_the_reference_is_not_used(tmp_path, settings, caplog, monkeypatch):
    # A CPU whose 8-bit arithmetic saturates would give vectors far from the reference ones.
    monkeypatch.setattr("memory.embedders.MIN_AGREEMENT", 0.99999)
    settings.DATA_DIR = tmp_path
    model = LocalMiniLM()
    with caplog.at_level("WARNING", logger="memory.embedders"):
        model.warm_up()
    assert "agree with the reference ones to a cosine of" in caplog.text
    reference = model.embed_reference([SEARCH_TEXTS[0]])[0]
    assert np.allclose(model.embed_query(SEARCH_TEXTS[0]), reference, atol=1e-6)
    assert np.allclose(model.embed([SEARCH_TEXTS[0]])[0], reference, atol=1e-6)
