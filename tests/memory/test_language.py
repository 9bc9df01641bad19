"""The text-search configuration a text is read with: its language's when clear, else English or 'simple'."""

from __future__ import annotations

import pytest
from django.db import connection

from memory.language import CONFIGS, NEUTRAL, text_search_config


@pytest.mark.django_db
def test_every_configuration_exists_in_postgres():
    with connection.cursor() as cursor:
        cursor.execute("SELECT cfgname FROM pg_ts_config")
        known = {row[0] for row in cursor}
    assert set(CONFIGS.values()) | {NEUTRAL} <= known


@pytest.mark.parametrize(
    ("text", "config"),
    [
        ("When did Caroline go to the pottery class?", "english"),
        ("Моя собака любит гулять в парке по утрам", "russian"),
        ("Что посоветовали врачи?", "russian"),
        ("Ich habe gestern mit meiner Schwester Tennis gespielt", "german"),
        ("J'ai adopté un chien la semaine dernière", "french"),
        ("ok cool", "english"),  # short and unclear, but most like English: read as English
        ("12:30 / 42", "english"),  # no letters
        ("Mae'r gath yn cysgu ar y gwely", NEUTRAL),  # Welsh: no Postgres configuration, not mangled
        ("猫はベッドの上で寝ています", NEUTRAL),
    ],
)
def test_a_text_is_read_in_its_own_language_or_as_simple_words(text, config):
    assert text_search_config(text) == config
