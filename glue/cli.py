"""``decice``: the command line of the DeciceJob bridge.

Exit codes (docs/framework.md):

====  ==========================================================================
0     success
1     any other error (API server unreachable or failing, configuration, ...)
2     invalid input: usage, unreadable file, invalid workflow / DeciceJob,
      a job the API server refused
3     ``wait``: the job finished Failed
4     ``wait``: timed out
5     the DeciceJob does not exist (or was deleted while waiting)
6     ``submit``: a different DeciceJob of that name exists
====  ==========================================================================

Errors go to stderr on one line.  ``render`` and ``translate`` work offline and
never import the Kubernetes client.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

from glue.errors import (
    ConfigError,
    Conflict,
    GlueError,
    InvalidInput,
    NotFound,
    Rejected,
    WaitTimeout,
)

EXIT_OK, EXIT_ERROR, EXIT_INVALID, EXIT_FAILED, EXIT_TIMEOUT, EXIT_NOT_FOUND, EXIT_CONFLICT = range(7)
RESOURCE = "decicejob.dev.decice.com"


class CliError(Exception):
    def __init__(self, message: str, code: int = EXIT_ERROR):
        super().__init__(message)
        self.code = code


def exit_code(error: GlueError) -> int:
    """The exit code scripts see for an error of the glue."""
    for kind, code in ((InvalidInput, EXIT_INVALID), (Rejected, EXIT_INVALID), (ConfigError, EXIT_INVALID),
                       (NotFound, EXIT_NOT_FOUND), (WaitTimeout, EXIT_TIMEOUT), (Conflict, EXIT_CONFLICT)):
        if isinstance(error, kind):
            return code
    return EXIT_ERROR


def load_documents(path: str) -> list[Any]:
    import yaml

    try:
        with (sys.stdin if path == "-" else open(path, encoding="utf-8")) as stream:
            return [d for d in yaml.load_all(stream, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d is not None]
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}", EXIT_INVALID) from None
    except yaml.YAMLError as exc:
        raise CliError(f"{path} is not valid YAML: {' '.join(str(exc).split())}", EXIT_INVALID) from None


def load_one(path: str, what: str) -> Any:
    documents = load_documents(path)
    if len(documents) != 1:
        raise CliError(f"{path} must hold exactly one {what}, found {len(documents)} documents", EXIT_INVALID)
    return documents[0]


def dump(objects: Any, output: str) -> str:
    if output == "json":
        import orjson

        return orjson.dumps(objects, option=orjson.OPT_INDENT_2).decode() + "\n"
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    if isinstance(objects, list):
        return yaml.dump_all(objects, Dumper=dumper, sort_keys=False, explicit_start=True)
    return yaml.dump(objects, Dumper=dumper, sort_keys=False)


def table(rows: list[list[str]]) -> str:
    """Rows as left-aligned columns, two spaces apart (the last column is not padded)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() + "\n" for row in rows)


def status_table(job: dict) -> str:
    """A DeciceJob's status for people: a summary line, its message, one row per task."""
    from hooks.read import as_dict, as_list

    meta, status = as_dict(job.get("metadata")), as_dict(job.get("status"))
    entries = {e.get("name"): e for e in as_list(status.get("tasks")) if isinstance(e, dict)}
    summary = [f"NAME: {meta.get('name')}", f"NAMESPACE: {meta.get('namespace')}",
               f"PHASE: {status.get('phase') or '-'}", f"TASKS: {status.get('progress') or '-'}"]
    if meta.get("deletionTimestamp"):
        summary.append(f"DELETING SINCE: {meta['deletionTimestamp']}")
    out = "   ".join(summary) + "\n"
    if status.get("message"):
        out += f"MESSAGE: {' '.join(str(status['message']).split())}\n"
    rows = [["TASK", "PHASE", "REPLICAS", "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "NODES", "MESSAGE"]]
    for task in as_list(as_dict(job.get("spec")).get("tasks")):
        entry = as_dict(entries.get(as_dict(task).get("name")))
        counts = [str(entry.get(k, "-")) for k in ("pending", "running", "succeeded", "failed")]
        rows.append([str(as_dict(task).get("name")), str(entry.get("phase") or "-"),
                     str(entry.get("replicas", as_dict(task).get("replicas", 1))), *counts,
                     ",".join(map(str, as_list(entry.get("nodes")))) or "-",
                     " ".join(str(entry.get("message") or "").split())])
    return out + "\n" + table(rows)


def client(args: argparse.Namespace) -> Any:
    from glue.client import DeciceJobClient

    return DeciceJobClient(namespace=args.namespace, kubeconfig=args.kubeconfig, context=args.context)


# --- commands ------------------------------------------------------------------------


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


def cmd_translate(args: argparse.Namespace) -> int:
    from glue.workflow import translate

    workflow = load_one(args.workflow, "workflow")
    schedule = load_one(args.schedule, "schedule") if args.schedule else None
    sys.stdout.write(dump(translate(workflow, schedule, namespace=args.namespace or "default"), args.output))
    return EXIT_OK


def _is_decicejob(document: Any) -> bool:
    return isinstance(document, dict) and ("kind" in document or "apiVersion" in document)


def cmd_submit(args: argparse.Namespace) -> int:
    from glue.workflow import translate

    document = load_one(args.file, "DeciceJob or workflow")
    schedule = load_one(args.schedule, "schedule") if args.schedule else None
    if _is_decicejob(document) and schedule is not None:
        raise CliError("--schedule goes with a DECICE workflow, not with a DeciceJob", EXIT_INVALID)
    api = client(args)
    manifest = document if _is_decicejob(document) else translate(document, schedule, namespace=api.namespace)
    job, created = api.submit(manifest, args.namespace)
    if args.output:
        sys.stdout.write(dump(job, args.output))
    else:
        print(f"{RESOURCE}/{job['metadata']['name']} {'created' if created else 'unchanged'}")
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    job = client(args).get(args.name)
    if args.updates:
        from glue.statuses import task_statuses

        sys.stdout.write(dump(task_statuses(job), args.output or "json"))
    elif args.output:
        sys.stdout.write(dump(job, args.output))
    else:
        sys.stdout.write(status_table(job))
    return EXIT_OK


def cmd_wait(args: argparse.Namespace) -> int:
    job = client(args).wait(args.name, timeout=args.timeout)
    status = job.get("status") or {}
    phase = status.get("phase")
    if args.output:
        sys.stdout.write(dump(job, args.output))
    else:
        print(f"{RESOURCE}/{args.name} {phase}")
    if phase != "Succeeded":
        raise CliError(f"{RESOURCE}/{args.name} failed: {' '.join(str(status.get('message') or '').split())}",
                       EXIT_FAILED)
    return EXIT_OK


def cmd_delete(args: argparse.Namespace) -> int:
    try:
        client(args).delete(args.name, propagation=args.cascade.capitalize())
    except NotFound:
        if not args.ignore_not_found:
            raise
        return EXIT_OK
    print(f"{RESOURCE}/{args.name} deleted")
    return EXIT_OK


def cmd_gc(args: argparse.Namespace) -> int:
    jobs = client(args).gc(args.namespace, all_namespaces=args.all_namespaces, label_selector=args.selector,
                           dry_run=args.dry_run)
    if args.output:
        sys.stdout.write(dump(jobs, args.output))
        return EXIT_OK
    for job in jobs:
        meta = job["metadata"]
        name = f"{meta['namespace']}/{meta['name']}" if args.all_namespaces else meta["name"]
        print(f"{RESOURCE}/{name} deleted{' (dry run)' if args.dry_run else ''}")
    return EXIT_OK


# --- arguments -----------------------------------------------------------------------


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be more than 0 seconds")
    return value


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="decice", description="Run DECICE workflows as DeciceJobs on Kubernetes.")
    sub = root.add_subparsers(dest="command", required=True)
    cluster = argparse.ArgumentParser(add_help=False)
    cluster.add_argument("-n", "--namespace", help="namespace (default: the kubeconfig context's, else default)")
    cluster.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)")
    cluster.add_argument("--context", help="kubeconfig context (default: the current context)")
    optional_output = argparse.ArgumentParser(add_help=False)
    optional_output.add_argument("-o", "--output", choices=("yaml", "json"), help="print the object(s) in this format")

    render = sub.add_parser("render", help="print the children the hooks would create for a DeciceJob (offline)")
    render.add_argument("file", help="DeciceJob YAML or JSON file ('-' for stdin)")
    render.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    render.set_defaults(func=cmd_render)

    translate = sub.add_parser("translate", help="print the DeciceJob for a DECICE workflow (offline)")
    translate.add_argument("workflow", help="DECICE workflow, YAML or JSON ('-' for stdin)")
    translate.add_argument("schedule", nargs="?", help="the AI scheduler's placements, YAML or JSON")
    translate.add_argument("-n", "--namespace", help="namespace of the DeciceJob (default: default)")
    translate.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    translate.set_defaults(func=cmd_translate)

    submit = sub.add_parser("submit", parents=[cluster, optional_output],
                            help="create a DeciceJob (from a DeciceJob or a DECICE workflow file)")
    submit.add_argument("file", help="DeciceJob or DECICE workflow, YAML or JSON ('-' for stdin)")
    submit.add_argument("--schedule", help="the AI scheduler's placements, for a workflow")
    submit.set_defaults(func=cmd_submit)

    status = sub.add_parser("status", parents=[cluster, optional_output], help="show a DeciceJob's status per task")
    status.add_argument("name")
    status.add_argument("--updates", action="store_true",
                        help="print the DECICE framework's task-status update instead (JSON unless -o yaml)")
    status.set_defaults(func=cmd_status)

    wait = sub.add_parser("wait", parents=[cluster, optional_output], help="wait until a DeciceJob has finished")
    wait.add_argument("name")
    wait.add_argument("--timeout", type=_seconds, help="give up after this many seconds (default: no limit)")
    wait.set_defaults(func=cmd_wait)

    delete = sub.add_parser("delete", parents=[cluster], help="delete a DeciceJob")
    delete.add_argument("name")
    delete.add_argument("--cascade", choices=("background", "foreground", "orphan"), default="background",
                        help="what happens to its children (default: background)")
    delete.add_argument("--ignore-not-found", action="store_true", help="exit 0 if the job does not exist")
    delete.set_defaults(func=cmd_delete)

    gc = sub.add_parser("gc", parents=[cluster, optional_output],
                        help="delete finished DeciceJobs past their ttlSecondsAfterFinished")
    gc.add_argument("-A", "--all-namespaces", action="store_true")
    gc.add_argument("-l", "--selector", help="only jobs matching this label selector")
    gc.add_argument("--dry-run", action="store_true", help="only list what would be deleted")
    gc.set_defaults(func=cmd_gc)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except CliError as exc:
        code, message = exc.code, str(exc)
    except GlueError as exc:
        code, message = exit_code(exc), str(exc)
    print(f"decice: error: {' '.join(message.split())}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
