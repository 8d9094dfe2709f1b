"""Names and metadata keys the glue writes onto DeciceJobs.

DECICE names are free text (uppercase, spaces, unicode, any length); Kubernetes
wants DNS labels within the limits of ``hooks.names``.  Every name here is a
pure function of the workflow, so translating the same workflow twice yields
the same DeciceJob (and ``submit`` of it again is a no-op).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from typing import Iterable

from hooks import names

WORKFLOW_ID = f"{names.GROUP}/workflow-id"
USER_ID = f"{names.GROUP}/user-id"
TASK_ID = f"{names.GROUP}/task-id"
DISPLAY_NAME = f"{names.GROUP}/display-name"
HPC_USER = f"{names.GROUP}/hpc-platform-username"
STORAGE_REQUEST = f"{names.GROUP}/storage-request"
STORAGE_CLASS = f"{names.GROUP}/storage-class"
STORAGE_ACCESS_MODE = f"{names.GROUP}/storage-access-mode"

GLUE_KEYS = frozenset({WORKFLOW_ID, USER_ID, TASK_ID, DISPLAY_NAME, HPC_USER})
"""Label and annotation keys the glue sets itself; a workflow cannot set them on tasks."""
HOOK_KEYS = frozenset({names.LABEL_JOB, names.LABEL_TASK, names.LABEL_INDEX, names.LABEL_ATTEMPT,
                       names.LABEL_MANAGED_BY})
"""Labels the hooks put on every pod."""

WORK_VOLUME = "work"
WORK_MOUNT_PATH = "/decice/work"
"""The shared work volume asked for by ``dev.decice.com/storage-request`` and where every task sees it."""

HASH_LENGTH = 8
JOB_PREFIX_MAX = names.JOB_AND_TASK_NAME_MAX // 2 - HASH_LENGTH - 2
"""Room for the workflow name in the job name ``<name>-<hash>``: the job name stays at most 24
characters, leaving every task at least 26 (``hooks.names.JOB_AND_TASK_NAME_MAX`` is 50)."""

_NOT_ALNUM = re.compile(r"[^a-z0-9]+")


def short_hash(value: str) -> str:
    """A stable short digest of a DECICE id."""
    return hashlib.sha256(value.encode()).hexdigest()[:HASH_LENGTH]


def sanitise(text: str) -> str:
    """``text`` as lowercase ASCII letters, digits and single hyphens ('' if nothing is left):
    accents are stripped (``Ü`` → ``u``), everything else becomes a separator."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return _NOT_ALNUM.sub("-", ascii_text.lower()).strip("-")


def _label(base: str, max_length: int, prefix: str) -> str:
    """A DNS label of at most ``max_length`` starting with a letter ('' for an empty base)."""
    if base and not base[0].isalpha():
        base = f"{prefix}-{base}"
    return base[:max_length].rstrip("-")


def _hashed(base: str, ident: str, max_length: int, prefix: str) -> str:
    head = _label(base, max_length - HASH_LENGTH - 1, prefix) or prefix
    return f"{head}-{short_hash(ident)}"


def job_name(workflow_name: str, workflow_id: str) -> str:
    """``<sanitised workflow name>-<hash of the workflow id>``: stable for a workflow and distinct
    for two workflows that share a name."""
    return _hashed(sanitise(workflow_name), workflow_id, JOB_PREFIX_MAX + HASH_LENGTH + 1, "wf")


def task_name_limit(job: str) -> int:
    return min(names.TASK_NAME_MAX, names.JOB_AND_TASK_NAME_MAX - len(job))


def task_names(tasks: Iterable[tuple[str, str]], job: str) -> dict[str, str]:
    """DNS-label task names by DECICE task id, from ``(id, name)`` pairs.

    A name keeps its sanitised form when that is unique; names that sanitise to nothing or to
    the same label as another task's all get a hash of their task id appended, so the result
    does not depend on the order of the tasks."""
    limit = task_name_limit(job)
    pairs = list(tasks)
    bases = {ident: _label(sanitise(name), limit, "task") for ident, name in pairs}
    counts = Counter(bases.values())
    return {
        ident: base if base and counts[base] == 1 else _hashed(base, ident, limit, "task")
        for ident, base in bases.items()
    }
