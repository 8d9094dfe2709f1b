"""``decice``: the command line of the DeciceJob bridge.

Exit codes: 0 success, 2 usage or invalid input, 1 any other error.  Errors
go to stderr on one line.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

EXIT_OK, EXIT_ERROR, EXIT_INVALID = 0, 1, 2


class CliError(Exception):
    def __init__(self, message: str, code: int = EXIT_ERROR):
        super().__init__(message)
        self.code = code


def load_documents(path: str) -> list[Any]:
    import yaml

    try:
        with (sys.stdin if path == "-" else open(path, encoding="utf-8")) as stream:
            return [d for d in yaml.load_all(stream, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d is not None]
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}", EXIT_INVALID) from None
    except yaml.YAMLError as exc:
        raise CliError(f"{path} is not valid YAML: {' '.join(str(exc).split())}", EXIT_INVALID) from None


def dump(objects: Any, output: str) -> str:
    if output == "json":
        import orjson

        return orjson.dumps(objects, option=orjson.OPT_INDENT_2).decode() + "\n"
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    if isinstance(objects, list):
        return yaml.dump_all(objects, Dumper=dumper, sort_keys=False, explicit_start=True)
    return yaml.dump(objects, Dumper=dumper, sort_keys=False)


def cmd_render(args: argparse.Namespace) -> int:
    from hooks.model import InvalidSpec
    from hooks.sync import render
    from hooks.timeutil import utc_now

    documents = load_documents(args.file)
    if len(documents) != 1:
        raise CliError(f"{args.file} must hold exactly one DeciceJob, found {len(documents)} documents", EXIT_INVALID)
    try:
        children = render(documents[0], utc_now())
    except InvalidSpec as exc:
        raise CliError(f"invalid DeciceJob: {exc}", EXIT_INVALID) from None
    sys.stdout.write(dump(children, args.output))
    return EXIT_OK


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="decice", description="Run DECICE workflows as DeciceJobs on Kubernetes.")
    sub = root.add_subparsers(dest="command", required=True)
    render = sub.add_parser("render", help="print the children the hooks would create for a DeciceJob (offline)")
    render.add_argument("file", help="DeciceJob YAML or JSON file ('-' for stdin)")
    render.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    render.set_defaults(func=cmd_render)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except CliError as exc:
        print(f"decice: error: {exc}", file=sys.stderr)
        return exc.code


if __name__ == "__main__":
    sys.exit(main())
