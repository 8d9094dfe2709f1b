"""Hook requests decoded straight from bytes, building only what the hooks read of observed Pods.

Most of a running job's request is its observed Pods as the API server returns them, about
4.5 KB each (managedFields, the whole spec, every status field), of which the kubernetes
runtime reads a dozen fields.  ``decode`` turns each Pod into a dict holding only the fields
of ``kubernetes.ObservedPod`` — a sub-tree of the full object, so every reader sees the same
values — and the parent and the other children the hooks manage in full, in one pass.
Skipping a field costs a scan, not an allocation: the whole decode takes a third to a fifth
of ``orjson.loads``'s time (benchmarks/README.md).  Children of kinds the hooks never
create are skipped too.

Two cases see the request in full instead.  A request the typed decoder does not accept (a
pod whose status is not an object, say, or nesting deeper than it recurses) is decoded with
orjson, so the general, defensive path answers it.  An answer that returns observed children
unchanged (``hooks.sync.refuse``) decodes the request again (``HookRequest.observed_in_full``).
"""

from __future__ import annotations

from typing import Any, TypedDict

import msgspec
import orjson

from hooks import sync
from hooks.runtimes.kubernetes import POD, ObservedPod


def _children() -> Any:
    """Observed children by kind, for every kind the hooks manage; Pods cut down, the rest in full.
    A kind the hooks never manage is skipped: only a refusal returns such children, and it
    decodes the request again in full."""
    kinds: dict[str, Any] = {kind: dict[str, Any] for kind in sorted(sync.MANAGED_KINDS)}
    kinds[POD] = dict[str, ObservedPod]
    return TypedDict("Children", kinds, total=False)  # type: ignore[operator]


class _Request(TypedDict, total=False):
    """The fields of a hook request the hooks read."""

    parent: Any
    children: _children()  # type: ignore[valid-type]
    finalizing: Any


_REQUEST = msgspec.json.Decoder(_Request)


def decode(data: bytes) -> Any:
    """The request body, its observed Pods cut down to ``ObservedPod``.  Raises
    orjson.JSONDecodeError for a body that is not JSON."""
    try:
        return _REQUEST.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return orjson.loads(data)
