"""Runtime modules by the name a task's ``runtime`` gives (see ``base`` for their interface)."""

from __future__ import annotations

from types import ModuleType

from hooks.runtimes import kubernetes
from hooks.runtimes import sedna

RUNTIMES: dict[str, ModuleType] = {kubernetes.NAME: kubernetes, sedna.NAME: sedna}
