"""Body size limit and slow clients, against the real server."""

from __future__ import annotations

import json
import socket

import pytest

from hooks import config
from hooks.app import create_app
from tests.servers import hook_server
from tests.test_ops_auth import REQUEST

BODY = json.dumps(REQUEST).encode()


def test_body_limit_is_configurable():
    client = create_app(settings=config.load([], {"DECICE_HOOKS_MAX_BODY_SIZE": "2Ki"})).test_client()
    assert client.post("/sync", data=BODY, content_type="application/json").status_code == 200
    response = client.post("/sync", data=b"[" + b" " * 4096 + b"]", content_type="application/json")
    assert response.status_code == 413 and response.get_json()["error"] == "RequestEntityTooLarge"


def read_reply(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (bounded by the socket timeout)."""
    chunks = []
    try:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except ConnectionResetError:
        pass
    return b"".join(chunks)


@pytest.fixture(scope="module")
def one_thread_server(tmp_path_factory):
    """One worker with one thread: a single stuck request would stop everything."""
    env = {"DECICE_HOOKS_WORKERS": "1", "DECICE_HOOKS_THREADS": "1", "DECICE_HOOKS_REQUEST_TIMEOUT": "1",
           "DECICE_HOOKS_MAX_BODY_SIZE": "4Ki"}
    with hook_server(tmp_path_factory.mktemp("limits"), env=env) as server:
        yield server


def test_oversized_body_is_refused_before_it_is_sent(one_thread_server):
    with socket.create_connection(("127.0.0.1", one_thread_server.port), timeout=10) as sock:
        sock.sendall(b"POST /sync HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 5000\r\nConnection: close\r\n\r\n")
        reply = read_reply(sock)
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413")
    assert json.loads(body)["error"] == "RequestEntityTooLarge"


def test_chunked_bodies_are_refused(one_thread_server):
    """The limit is checked from Content-Length before reading; a body without one is refused."""
    with socket.create_connection(("127.0.0.1", one_thread_server.port), timeout=10) as sock:
        sock.sendall(b"POST /sync HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                     + b"400\r\n" + b" " * 1024 + b"\r\n" + b"0\r\n\r\n")
        reply = read_reply(sock)
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 411")
    assert json.loads(body)["error"] == "LengthRequired"


def test_slow_clients_do_not_pin_the_worker(one_thread_server):
    """One client stalls in its headers, one in its body; the only thread is freed after the
    request timeout each time, their connections are closed, and a normal client is served."""
    server = one_thread_server
    stalled_headers = socket.create_connection(("127.0.0.1", server.port), timeout=15)
    stalled_headers.sendall(b"POST /sync HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n")
    slow = [stalled_headers]
    stalled_body = socket.create_connection(("127.0.0.1", server.port), timeout=15)
    stalled_body.sendall(b"POST /sync HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 1000\r\n\r\n{\"parent\": ")
    slow.append(stalled_body)
    try:
        status, _, payload = server.request("/sync", BODY, timeout=15)
        assert status == 200 and json.loads(payload)["children"]
        for sock in slow:
            assert not read_reply(sock).startswith(b"HTTP/1.1 200"), "the slow request was cut off"
    finally:
        for sock in slow:
            sock.close()
    assert server.count("closing connection from") >= 2
    assert server.request("/healthz")[0] == 200


def read_response(sock: socket.socket) -> bytes:
    """One HTTP response (headers and Content-Length body), without waiting for the close."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def test_clients_that_do_not_close_do_not_stall_the_worker(one_thread_server):
    """Answers to ``Connection: close`` requests end with the server's FIN; clients that never
    send theirs must not hold up the worker's event loop (gunicorn's own graceful close would
    wait 2 s for each, accepting no one meanwhile)."""
    request = (b"POST /sync HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
               b"Content-Length: " + str(len(BODY)).encode() + b"\r\n\r\n" + BODY)
    lingering = [socket.create_connection(("127.0.0.1", one_thread_server.port), timeout=15) for _ in range(5)]
    try:
        for sock in lingering:
            sock.sendall(request)
        for sock in lingering:
            assert read_response(sock).startswith(b"HTTP/1.1 200")
        status, _, _ = one_thread_server.request("/healthz", timeout=5)
        assert status == 200
        for sock in lingering:
            assert read_reply(sock) == b"", "the server closed its side"
    finally:
        for sock in lingering:
            sock.close()
