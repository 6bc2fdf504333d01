"""The secret registry: a registered value is scrubbed from texts, data and every log record."""

from __future__ import annotations

import io
import json
import logging
import secrets
from collections.abc import Iterator
from urllib.parse import quote, quote_plus

import pytest
from agentplug.core.redaction import (
    MIN_SECRET_LENGTH,
    REDACTED,
    ScrubbingFilter,
    forget_secret,
    looks_like_credential,
    register_credentials,
    register_secret,
    scrub,
    scrub_data,
)


def _secret() -> str:
    return f"tok-{secrets.token_hex(10)}+/=\"'"


@pytest.fixture
def handler_output() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
    logger = logging.getLogger("agentplug.tests.redaction")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield stream
    finally:
        logger.removeHandler(handler)


def test_a_registered_secret_is_replaced_in_every_form_a_server_echoes_it() -> None:
    value = _secret()
    register_secret(value)
    forms = {
        "raw": value,
        "url": quote(value, safe=""),
        "url-plus": quote_plus(value),
        "json": json.dumps(value)[1:-1],
        "repr": repr(value)[1:-1],
    }
    for name, form in forms.items():
        assert scrub(f"said <{form}>") == f"said <{REDACTED}>", name


def test_a_secret_split_by_whitespace_is_replaced_whole() -> None:
    value = "wrap-" + secrets.token_hex(12)
    register_secret(value)
    assert scrub(f"key {value[:9]}\n   {value[9:]} was refused") == f"key {REDACTED} was refused"
    assert scrub(f"key {value[:4]} {value[4:20]}\t{value[20:]}.") == f"key {REDACTED}."


def test_a_value_shorter_than_the_minimum_is_not_registered() -> None:
    short = "x" * (MIN_SECRET_LENGTH - 1)
    assert register_secret(short) is False
    assert scrub(f"a {short} b") == f"a {short} b"
    assert register_secret(None) is False and register_secret(12345678) is False


def test_scrub_data_scrubs_nested_strings_and_keys() -> None:
    value = _secret()
    register_secret(value)
    data = {"error": f"failed: {value}", "handlers": [{"error": value}], value: 1, "n": 2}
    assert scrub_data(data) == {
        "error": f"failed: {REDACTED}",
        "handlers": [{"error": REDACTED}],
        REDACTED: 1,
        "n": 2,
    }


def test_every_log_record_is_scrubbed_message_arguments_exception_and_stack(
    handler_output: io.StringIO, caplog: pytest.LogCaptureFixture
) -> None:
    value = _secret()
    register_secret(value)
    log = logging.getLogger("agentplug.tests.redaction")
    with caplog.at_level(logging.DEBUG, logger="agentplug.tests.redaction"):
        log.warning("message with %s", value)
        log.info(f"formatted {value}")
        try:
            raise RuntimeError(f"exception with {value}")
        except RuntimeError:
            log.exception("caught")
        log.debug("stack", stack_info=True, extra={"detail": value})
    text = handler_output.getvalue()
    assert "RuntimeError: exception with ***" in text and "Stack (most recent" in text
    assert value not in text and value not in caplog.text
    assert all(value not in r.getMessage() for r in caplog.records)


def test_a_record_of_any_logger_is_scrubbed_not_only_agentplug_ones(
    caplog: pytest.LogCaptureFixture,
) -> None:
    value = _secret()
    register_secret(value)
    with caplog.at_level(logging.INFO, logger="some.library"):
        logging.getLogger("some.library").info("connecting with %s", value)
    assert caplog.records[-1].getMessage() == f"connecting with {REDACTED}"


def test_the_handler_filter_also_scrubs_extra_fields(handler_output: io.StringIO) -> None:
    value = _secret()
    register_secret(value)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s %(detail)s"))
    handler.addFilter(ScrubbingFilter())
    log = logging.getLogger("agentplug.tests.redaction")
    log.addHandler(handler)
    try:
        log.warning("extra:", extra={"detail": {"key": value}})
    finally:
        log.removeHandler(handler)
    assert stream.getvalue().strip() == "extra: {'key': '***'}"


def test_a_record_without_a_secret_is_left_as_it_was(caplog: pytest.LogCaptureFixture) -> None:
    register_secret(_secret())
    with caplog.at_level(logging.INFO, logger="agentplug.tests.redaction"):
        logging.getLogger("agentplug.tests.redaction").info("count %d of %s", 3, "items")
    record = caplog.records[-1]
    assert (record.msg, record.args) == ("count %d of %s", (3, "items"))


@pytest.mark.parametrize(
    "name", ["Authorization", "X-Api-Key", "GITHUB_TOKEN", "DB_PASSWORD", "Cookie", "API_KEY"]
)
def test_credential_names_are_recognised(name: str) -> None:
    assert looks_like_credential(name)


@pytest.mark.parametrize("name", ["Content-Type", "Accept", "PATH", "ROOT", "LANG"])
def test_ordinary_names_are_not_credentials(name: str) -> None:
    assert not looks_like_credential(name)


def test_register_credentials_takes_credential_values_and_the_bare_bearer_token() -> None:
    token = secrets.token_hex(12)
    root = "/srv/" + secrets.token_hex(6)
    assert register_credentials({"Authorization": f"Bearer {token}", "ROOT": root}) == 2
    assert scrub(f"token {token}; root {root}") == f"token {REDACTED}; root {root}"


def test_the_whitespace_the_scrubber_skips_is_what_str_isspace_accepts() -> None:
    import sys

    from agentplug.core.redaction import SPACES

    assert set(SPACES) == {chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()}


def test_scrubbing_while_another_thread_registers_secrets_never_raises() -> None:
    import sys
    import threading

    errors: list[BaseException] = []
    stop = threading.Event()
    text = "a b c " * 50

    def scrubber() -> None:
        while not stop.is_set():
            try:
                scrub(text)
            except BaseException as exc:  # the failure this test exists to catch
                errors.append(exc)
                return

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    thread = threading.Thread(target=scrubber)
    thread.start()
    registered: list[str] = []
    try:
        for i in range(150):
            value = f"racing-secret-{secrets.token_hex(8)}-{i}"
            register_secret(value)
            registered.append(value)
            if errors:
                break
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(interval)
        for value in registered:
            forget_secret(value)
    assert errors == []
