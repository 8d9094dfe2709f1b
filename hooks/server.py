"""``decice-hooks``: the hook service under gunicorn, with defaults fit for production.

Settings come from flags or ``DECICE_HOOKS_*`` environment variables (flags
win).  The work is CPU-bound JSON, so the defaults are one process per core
with a few threads each.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Sequence

from gunicorn.app.base import BaseApplication

DEFAULTS = {"bind": "0.0.0.0:8080", "workers": 2, "threads": 4, "timeout": 30}


class HookServer(BaseApplication):
    def __init__(self, options: dict[str, Any]):
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        from hooks.app import create_app

        return create_app()


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def options(argv: Sequence[str] | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
    env = dict(os.environ if env is None else env)
    parser = argparse.ArgumentParser(prog="decice-hooks", description="Serve the DeciceJob Metacontroller hooks.")
    parser.add_argument("--bind", default=env.get("DECICE_HOOKS_BIND", DEFAULTS["bind"]), help="HOST:PORT")
    parser.add_argument("--workers", type=_positive, default=env.get("DECICE_HOOKS_WORKERS", DEFAULTS["workers"]))
    parser.add_argument("--threads", type=_positive, default=env.get("DECICE_HOOKS_THREADS", DEFAULTS["threads"]))
    parser.add_argument("--timeout", type=_positive, default=env.get("DECICE_HOOKS_TIMEOUT", DEFAULTS["timeout"]))
    args = parser.parse_args(argv)
    try:
        values = {k: _positive(str(getattr(args, k))) for k in ("workers", "threads", "timeout")}
    except (ValueError, argparse.ArgumentTypeError) as exc:
        parser.error(f"invalid setting: {exc}")
    return {
        "bind": args.bind,
        **values,
        "worker_tmp_dir": "/tmp",
        "accesslog": None,
        "graceful_timeout": 20,
        "keepalive": 30,
    }


def main(argv: Sequence[str] | None = None) -> None:
    HookServer(options(argv)).run()
    sys.exit(0)


if __name__ == "__main__":
    main()
