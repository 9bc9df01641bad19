"""Body limits that hold: 413 whether or not Content-Length is declared, counted as the bytes arrive,
through the real server; and a legitimate chunked JSON body is parsed."""

from __future__ import annotations

import http.client
import io
import json
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pytest
from django.conf import settings
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections

from accounts.models import Person
from config.bodylimit import WsgiBodyLimit
from memory.models import Note
from tests.support.fixtures import LiveServer

FIFTY_MB = 50 * 1024 * 1024
CHUNK = b" " * 65536  # whitespace: were it all read, it would still be one JSON document


@dataclass
class Answer:
    status: int
    body: bytes
    seconds: float  # from the first body byte sent to the whole answer read
    sent_when_answered: int  # body bytes the client had handed to its socket by then

    def json(self) -> dict:
        return json.loads(self.body)


def post_while_sending(
    server: LiveServer, path: str, chunks: Iterable[bytes], *, headers: dict[str, str], chunked: bool = True
) -> Answer:
    """Send the body from a thread and read the answer meanwhile, as a client whose upload is refused
    midway would: the answer may come long before the body is all sent."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 256 * 1024)  # so sent ≈ what the server took in
    sock.settimeout(30)
    sock.connect((server.host, server.port))
    head = [f"POST {path} HTTP/1.1", f"Host: {server.host}:{server.port}", "Content-Type: application/json"]
    head += [f"{name}: {value}" for name, value in headers.items()]
    if chunked:
        head.append("Transfer-Encoding: chunked")
    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
    sent = 0

    def pump() -> None:
        nonlocal sent
        try:
            for chunk in chunks:
                sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n" if chunked else chunk)
                sent += len(chunk)
            if chunked:
                sock.sendall(b"0\r\n\r\n")
        except OSError:  # the server answered and closed the connection: the rest is not wanted
            pass

    started = time.monotonic()
    sender = threading.Thread(target=pump, daemon=True)
    sender.start()
    try:
        response = http.client.HTTPResponse(sock)
        response.begin()
        body = response.read()
        answer = Answer(response.status, body, time.monotonic() - started, sent)
    finally:
        sock.close()
        sender.join(timeout=10)
    return answer


def fifty_megabytes() -> Iterator[bytes]:
    for _ in range(FIFTY_MB // len(CHUNK)):
        yield CHUNK


def assert_too_large(answer: Answer) -> None:
    assert answer.status == 413
    error = answer.json()["error"]
    assert error["code"] == "too_large"
    assert f"limit of {settings.API_MAX_BODY_BYTES} bytes" in error["message"]


@pytest.mark.parametrize("path", ["/api/v1/tools/remember", "/api/v1/imports", "/mcp"])
def test_a_chunked_anonymous_body_over_the_limit_is_refused_as_it_arrives(asgi_server, path):
    answer = post_while_sending(asgi_server, path, fifty_megabytes(), headers={})
    print(f"{path}: {answer.status} after {answer.seconds:.2f}s, {answer.sent_when_answered / 1e6:.1f} MB of 50 sent")
    assert_too_large(answer)
    # Refused at the limit (1 MB), not after reading 50 MB: what the client had sent by then is the
    # limit plus what the sockets' buffers took in meanwhile (a few MB).
    assert answer.sent_when_answered < FIFTY_MB / 2
    assert answer.seconds < 10


def test_a_declared_length_over_the_limit_is_refused_before_any_body_is_sent(asgi_server):
    answer = post_while_sending(
        asgi_server, "/api/v1/tools/remember", [], headers={"Content-Length": str(FIFTY_MB)}, chunked=False
    )
    assert answer.sent_when_answered == 0
    assert_too_large(answer)


def test_a_content_length_that_is_not_a_number_is_invalid(asgi_server):
    answer = post_while_sending(
        asgi_server, "/api/v1/tools/remember", [], headers={"Content-Length": "-1"}, chunked=False
    )
    # h11 refuses it before the app sees it; either way a 400, never a 500.
    assert answer.status == 400


@pytest.mark.django_db(transaction=True)
def test_a_chunked_json_body_within_the_limit_is_parsed(asgi_server, tenant):
    body = json.dumps(
        {"person": "ada", "key": "home-city", "description": "Where Ada lives", "content": "Ada lives in Oslo."}
    ).encode()
    connection = http.client.HTTPConnection(asgi_server.host, asgi_server.port, timeout=30)
    connection.request(
        "POST",
        "/api/v1/tools/remember",
        body=iter([body[:10], body[10:40], body[40:]]),  # several chunks, no Content-Length
        headers={"Authorization": f"Bearer {tenant.key.plaintext}", "Content-Type": "application/json"},
        encode_chunked=True,
    )
    response = connection.getresponse()
    answer = json.loads(response.read())
    connection.close()
    assert response.status == 200, answer
    assert (answer["bank"], answer["key"], answer["action"]) == ("user:ada", "home-city", "created")
    assert Note.objects.get(team=tenant.team).content == "Ada lives in Oslo."


@pytest.mark.django_db(transaction=True)
def test_a_chunked_body_of_exactly_the_limit_reaches_the_api_and_one_byte_more_does_not(asgi_server, tenant):
    limit = settings.API_MAX_BODY_BYTES
    auth = {"Authorization": f"Bearer {tenant.key.plaintext}"}

    def person_body(size: int) -> bytes:
        shell = json.dumps({"person": "ada", "display_name": ""}).encode()
        return shell.replace(b'""', b'"' + b"x" * (size - len(shell)) + b'"')

    at_limit = person_body(limit)
    answer = post_while_sending(asgi_server, "/api/v1/people", [at_limit[:5000], at_limit[5000:]], headers=auth)
    # Read whole and parsed: the display name's own cap (200) answers, not the body limit.
    assert answer.status == 400
    assert answer.json()["error"]["field"] == "display_name"

    over = person_body(limit + 1)
    answer = post_while_sending(asgi_server, "/api/v1/people", [over[:5000], over[5000:]], headers=auth)
    assert_too_large(answer)
    assert not Person.objects.filter(team=tenant.team).exists()


@pytest.mark.django_db(transaction=True)
def test_a_chunked_mcp_call_within_the_limit_is_served(asgi_server, tenant):
    call = {
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "remember", "arguments": {"person": "ada", "key": "pet", "description": "Ada's pet",
                                                     "content": "A cat named Miso."}},
    }  # fmt: skip
    raw = json.dumps(call).encode()
    headers = {"Authorization": f"Bearer {tenant.key.plaintext}", "Accept": "application/json, text/event-stream"}
    answer = post_while_sending(asgi_server, "/mcp", [raw[:20], raw[20:]], headers=headers)
    assert answer.status == 200, answer.body
    assert answer.json()["result"]["structuredContent"]["action"] == "created"
    assert Note.objects.get(team=tenant.team).key == "pet"


# --- WSGI (gunicorn and other servers that decode chunked bodies for the app) -------------------


def wsgi_call(app: WsgiBodyLimit, body: bytes, **environ: str) -> tuple[str, bytes]:
    captured: list[str] = []
    base = {
        "REQUEST_METHOD": "POST", "PATH_INFO": "/api/v1/people", "SERVER_NAME": "testserver", "SERVER_PORT": "80",
        "wsgi.input": io.BytesIO(body), "wsgi.url_scheme": "http", "CONTENT_TYPE": "application/json",
        "HTTP_HOST": "testserver",
    }  # fmt: skip
    # As Django's test client does: the request must not close the test's database connection.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        result = app({**base, **environ}, lambda status, headers, *_: captured.append(status))
        try:
            return captured[0], b"".join(result)
        finally:
            if hasattr(result, "close"):  # as a WSGI server does: Django's request_finished is sent here
                result.close()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def test_the_wsgi_limit_counts_a_chunked_body_and_hands_a_small_one_on(tenant):
    app = WsgiBodyLimit(get_wsgi_application(), limit=settings.API_MAX_BODY_BYTES)
    chunked = {"HTTP_TRANSFER_ENCODING": "chunked", "HTTP_AUTHORIZATION": f"Bearer {tenant.key.plaintext}"}

    status, body = wsgi_call(app, b" " * (settings.API_MAX_BODY_BYTES + 1), **chunked)
    assert status.startswith("413")
    assert json.loads(body)["error"]["code"] == "too_large"

    status, body = wsgi_call(app, json.dumps({"person": "ada"}).encode(), **chunked)
    assert status.startswith("201"), body
    assert json.loads(body)["person"] == "ada"

    status, _ = wsgi_call(app, b"", CONTENT_LENGTH=str(FIFTY_MB))
    assert status.startswith("413")
