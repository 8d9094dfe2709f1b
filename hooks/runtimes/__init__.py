"""Runtime modules by the name a task's ``runtime`` gives (see ``base`` for their interface)."""

from __future__ import annotations

from types import ModuleType

from hooks.runtimes import kubeedge, kubernetes, sedna, volcano

RUNTIMES: dict[str, ModuleType] = {module.NAME: module for module in (kubernetes, volcano, kubeedge, sedna)}
