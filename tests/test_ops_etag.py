"""ETag: Metacontroller's If-None-Match gets 304 when the answer would be the same bytes."""

from __future__ import annotations

import hashlib
import json

from hooks import config
from hooks.app import create_app, etag_matches
from tests.test_ops_auth import REQUEST


def sync(client, body=REQUEST, headers=None):
    return client.post("/sync", data=json.dumps(body), content_type="application/json", headers=headers or {})


def test_answer_carries_the_etag_of_its_bytes(client):
    response = sync(client)
    assert response.status_code == 200
    etag = response.headers["ETag"]
    assert etag == '"' + hashlib.sha256(response.get_data()).hexdigest()[:32] + '"'
    assert sync(client).headers["ETag"] == etag


def test_matching_if_none_match_gets_304_without_body(client):
    etag = sync(client).headers["ETag"]
    for header in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        response = sync(client, headers={"If-None-Match": header})
        assert response.status_code == 304, header
        assert response.get_data() == b""
        assert response.headers["ETag"] == etag


def test_changed_answer_gets_200(client):
    etag = sync(client).headers["ETag"]
    changed = json.loads(json.dumps(REQUEST))
    changed["parent"]["spec"]["tasks"][0]["image"] = "busybox:1.37"
    response = sync(client, changed, headers={"If-None-Match": etag})
    assert response.status_code == 200 and response.headers["ETag"] != etag
    assert response.get_json()["children"]


def test_errors_carry_no_etag(client):
    response = client.post("/sync", data=b"{", content_type="application/json", headers={"If-None-Match": "*"})
    assert response.status_code == 400 and "ETag" not in response.headers


def test_etag_can_be_switched_off():
    client = create_app(settings=config.load([], {"DECICE_HOOKS_ETAG": "false"})).test_client()
    response = sync(client, headers={"If-None-Match": "*"})
    assert response.status_code == 200 and "ETag" not in response.headers


def test_etag_matching():
    assert etag_matches('"a"', '"a"')
    assert not etag_matches(None, '"a"')
    assert not etag_matches('"b"', '"a"')
    assert not etag_matches('"a', '"a"')
