"""A database password never appears in what a PostgreSQL store says (messages, logs).

libpq repeats parts of a connection URL it cannot parse; those echoes are scrubbed.
No server is needed: every URL here fails before or at connecting.
"""

from __future__ import annotations

import logging

import pytest

psycopg = pytest.importorskip(
    "psycopg", reason="psycopg missing: pip install 'agentplug[postgres]'"
)

from agentplug.store import StateStoreUnavailable, open_store_url  # noqa: E402
from agentplug.store.postgres import redact_url  # noqa: E402

SECRET = "s3cr%zzet pass"


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:s3cr%zzet@127.0.0.1:1/db",  # a bad percent escape: libpq echoes it
        "postgresql://u:s3cr zzet@127.0.0.1:1/db",  # a space: libpq echoes it
        "postgresql://u:s3crzzet@[::1/db",  # an unbalanced bracket: libpq echoes the URL
        "postgresql://u@127.0.0.1:1/db?password=s3crzzet&connect_timeout=1",
    ],
)
def test_a_password_never_appears_in_the_unavailable_message_or_the_log(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG), pytest.raises(StateStoreUnavailable) as err:
        open_store_url(url, retry_ms=0)
    said = str(err.value) + caplog.text
    assert "s3cr" not in said and "zzet" not in said, said
    assert "\n" not in str(err.value)


def test_redact_url_of_an_unparseable_url_is_a_placeholder_not_an_error() -> None:
    assert redact_url("postgresql://u:pw@[::1/db") == "postgresql://<unparseable URL>"


def test_a_state_url_password_is_scrubbed_from_every_later_message_of_the_process(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import secrets

    from agentplug.core.redaction import scrub

    password = "pw-" + secrets.token_hex(8)
    with pytest.raises(StateStoreUnavailable):
        open_store_url(f"postgresql://u:{password}@127.0.0.1:1/db", retry_ms=0)
    with caplog.at_level(logging.INFO, logger="agentplug.tests"):
        logging.getLogger("agentplug.tests").info("a plugin echoes %s", password)
    assert password not in caplog.text
    assert password not in scrub(f"an error naming {password}")
