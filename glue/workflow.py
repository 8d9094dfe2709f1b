"""DECICE workflows (plus the AI scheduler's placements) into DeciceJob manifests.

The input is DECICE's own format as plain dicts (docs/framework.md has the full
mapping).  It is validated with marshmallow first, so every problem comes back
at once, named by its field (``tasks[2].required_memory: ...``); whatever a
DeciceJob cannot express raises :class:`UnsupportedWorkflow` instead of being
dropped.  The manifest built is then parsed by ``hooks.model.parse_job``, the
same model the hooks use, so a translated job is one the hooks accept.
"""

from __future__ import annotations

import re
import shlex
import uuid
from typing import Any, Mapping

from marshmallow import RAISE, Schema, ValidationError, fields, validate, validates_schema

from glue import naming
from glue.errors import InvalidInput, InvalidWorkflow, UnsupportedWorkflow
from hooks import names
from hooks.model import ACCESS_MODES, QUANTITY_PATTERN, EnvVarSchema, InvalidSpec, Quantity, error_lines, parse_job

JOB, DEPLOYMENT, HPC_JOB, K8S_RESOURCE = "job", "deployment", "hpc_job", "k8s_resource"
TASK_TYPES = (JOB, DEPLOYMENT, HPC_JOB, K8S_RESOURCE)

_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUANTITY = re.compile(QUANTITY_PATTERN)
_PLAIN_NUMBER = re.compile(r"^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)$")
_SHELL_SYNTAX = frozenset("|&;<>()`$")
_ENV_SOURCES = frozenset({"fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef", "fileKeyRef"})


# --- fields -------------------------------------------------------------------


def _is_label_value(value: str, allow_empty: bool = True) -> bool:
    return len(value) <= 63 and bool(_LABEL_VALUE.match(value)) and (allow_empty or bool(value))


def _qualified_name(key: str) -> None:
    """A label or annotation key: ``[prefix/]name`` as Kubernetes defines it."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        raise ValidationError(f"{key!r}: the prefix must be a DNS subdomain")
    if len(name) > 63 or not _LABEL_NAME.match(name):
        raise ValidationError(f"{key!r}: must be [prefix/]name with a name of at most 63 letters, digits, '-', '_', '.'")


class Identifier(fields.Field):
    """A DECICE id (a UUID, as a string or ``uuid.UUID``); it must be a valid label value, which
    every UUID is, because the glue puts it into labels."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        text = str(value) if isinstance(value, uuid.UUID) else value
        if not isinstance(text, str) or not _is_label_value(text, allow_empty=False):
            raise ValidationError("must be a UUID (an id of at most 63 letters, digits, '-', '_' or '.')")
        return text


class Text(fields.Field):
    """A label or annotation value: a string, or a number or boolean written as one."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (str, int, float)):
            return str(value)
        raise ValidationError("must be a string, number or boolean")


class LabelValue(Text):
    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        text = super()._deserialize(value, attr, data, **kwargs)
        if not _is_label_value(text):
            raise ValidationError(f"{text!r} is not a label value (at most 63 letters, digits, '-', '_', '.')")
        return text


def _mebibytes(value: str) -> str:
    """DECICE writes memory and storage in MiB when no unit is given."""
    return f"{value}Mi" if _PLAIN_NUMBER.match(value) else value


class Memory(Quantity):
    """A Kubernetes quantity; a plain number means MiB."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        return _mebibytes(super()._deserialize(value, attr, data, **kwargs))


class GpuCount(fields.Field):
    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> int:
        if isinstance(value, str) and value.isdigit():
            return int(value)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        raise ValidationError("must be a whole number of GPUs (0 or more)")


class Dependency(Identifier):
    """A task id, or an object with an ``id`` (DECICE accepts both)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        if isinstance(value, Mapping):
            value = value.get("id")
        return super()._deserialize(value, attr, data, **kwargs)


def _labels() -> fields.Dict:
    return fields.Dict(keys=fields.String(validate=_qualified_name), values=LabelValue(), load_default=dict,
                       allow_none=True)


def _annotations() -> fields.Dict:
    return fields.Dict(keys=fields.String(validate=_qualified_name), values=Text(), load_default=dict, allow_none=True)


# --- schemas ------------------------------------------------------------------


class _Strict(Schema):
    """Unknown fields are errors: a misspelt field would otherwise be dropped unnoticed."""

    class Meta:
        unknown = RAISE


class EnvSchema(EnvVarSchema):
    """DECICE's EnvVar: the Kubernetes EnvVar fields, with ``null`` for the unused one."""

    value = fields.String(allow_none=True)
    valueFrom = fields.Dict(keys=fields.String(), allow_none=True)

    @validates_schema
    def one_source(self, data: dict, **_: Any) -> None:
        if data.get("value") is not None and data.get("valueFrom") is not None:
            raise ValidationError("set value or valueFrom, not both")
        source = data.get("valueFrom")
        if source is not None and (len(source) != 1 or not set(source) <= _ENV_SOURCES):
            raise ValidationError(f"must hold exactly one of {', '.join(sorted(_ENV_SOURCES))}", "valueFrom")


class TaskSchema(_Strict):
    id = Identifier(required=True)
    name = fields.String(required=True)
    type = fields.String(required=True, validate=validate.OneOf(TASK_TYPES))
    status = fields.Raw(allow_none=True)
    image = fields.String(allow_none=True, validate=validate.Length(min=1, max=1024))
    command_str = fields.String(allow_none=True)
    required_cpu = Quantity(allow_none=True)
    required_memory = Memory(allow_none=True)
    required_gpu = GpuCount(allow_none=True)
    annotations = _annotations()
    labels = _labels()
    env = fields.List(fields.Nested(EnvSchema), load_default=list, allow_none=True)
    dependencies = fields.List(Dependency(), load_default=list, allow_none=True)
    replicas = fields.Integer(strict=True, allow_none=True, validate=validate.Range(min=1, max=names.REPLICAS_MAX))


class HpcContextSchema(_Strict):
    platform_username = fields.String(allow_none=True)
    default_working_dir = fields.String(allow_none=True)


class WorkflowSchema(_Strict):
    id = Identifier(required=True)
    name = fields.String(required=True)
    status = fields.Raw(allow_none=True)
    user_id = Identifier(allow_none=True)
    filename = fields.Raw(allow_none=True)
    description = fields.Raw(allow_none=True)
    annotations = _annotations()
    tasks = fields.List(fields.Nested(TaskSchema), required=True, validate=validate.Length(min=1))
    hpc_context = fields.Nested(HpcContextSchema, allow_none=True)


def _node_name(value: str) -> None:
    if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        raise ValidationError(f"{value!r} is not a node name")


class PlacementSchema(_Strict):
    task_id = Identifier(required=True)
    target_node_ids = fields.List(fields.String(validate=_node_name), required=True, validate=validate.Length(min=1))


class ScheduleSchema(_Strict):
    workflow_id = Identifier(allow_none=True)
    placements = fields.List(fields.Nested(PlacementSchema), required=True)


def _load(schema: Schema, data: Any, what: str) -> dict:
    if not isinstance(data, Mapping):
        raise InvalidWorkflow([f"{what}: must be an object"])
    try:
        return schema.load(data)
    except ValidationError as exc:
        raise InvalidWorkflow(sorted(error_lines(exc.messages, "" if what == "workflow" else what))) from None


# --- translation ---------------------------------------------------------------


def split_command(command: str) -> list[str]:
    """``command_str`` split the way a POSIX shell splits words (quotes, escapes), without a shell.
    Unquoted shell syntax (pipes, redirections, ``;``, ``&&``, ``$`` expansions, sub-shells) is
    refused: no shell runs the command, so the container would receive it as literal arguments.
    Quoted text is passed on as written (``sh -c "echo $HOME"`` lets that ``sh`` expand it)."""
    quote, escaped = "", False
    for char in command:
        if escaped:
            escaped = False
            continue
        if quote == "'":
            quote = "" if char == "'" else quote
            continue
        if char == "\\":
            escaped = True
            continue
        if quote == '"':
            quote = "" if char == '"' else quote
            expands = False
        elif char in "'\"":
            quote, expands = char, False
        else:
            expands = char in _SHELL_SYNTAX
        if expands:
            raise ValueError(
                f"shell syntax {char!r} is not interpreted (no shell runs the command); "
                f"write it as: sh -c {shlex.quote(command)}"
            )
    return shlex.split(command)


def _placements(schedule: Mapping | None, workflow: dict, errors: list[str]) -> dict[str, list[str]]:
    if schedule is None:
        return {}
    loaded = _load(ScheduleSchema(), schedule, "schedule")
    if loaded.get("workflow_id") not in (None, workflow["id"]):
        errors.append(f"schedule.workflow_id: {loaded['workflow_id']} is not the workflow's id {workflow['id']}")
    task_ids = {t["id"] for t in workflow["tasks"]}
    nodes: dict[str, list[str]] = {}
    for i, placement in enumerate(loaded["placements"]):
        task_id = placement["task_id"]
        if task_id not in task_ids:
            errors.append(f"schedule.placements[{i}].task_id: no task {task_id} in the workflow")
        elif task_id in nodes:
            errors.append(f"schedule.placements[{i}].task_id: task {task_id} is placed twice")
        else:
            nodes[task_id] = placement["target_node_ids"]
    return nodes


def _storage(annotations: Mapping[str, str], errors: list[str]) -> dict[str, Any] | None:
    """The job's shared work volume, if the workflow asks for one."""
    if naming.STORAGE_REQUEST not in annotations:
        for key in (naming.STORAGE_CLASS, naming.STORAGE_ACCESS_MODE):
            if key in annotations:
                errors.append(f"annotations[{key}]: only meaningful with {naming.STORAGE_REQUEST}")
        return None
    size = _mebibytes(annotations[naming.STORAGE_REQUEST].strip())
    volume: dict[str, Any] = {"name": naming.WORK_VOLUME, "size": size, "accessModes": ["ReadWriteMany"]}
    if not _QUANTITY.match(size):
        errors.append(f"annotations[{naming.STORAGE_REQUEST}]: {size!r} is not a quantity (e.g. 1Gi, or 512 for MiB)")
    if naming.STORAGE_ACCESS_MODE in annotations:
        mode = annotations[naming.STORAGE_ACCESS_MODE]
        if mode not in ACCESS_MODES:
            errors.append(f"annotations[{naming.STORAGE_ACCESS_MODE}]: must be one of {', '.join(ACCESS_MODES)}")
        volume["accessModes"] = [mode]
    if naming.STORAGE_CLASS in annotations:
        storage_class = annotations[naming.STORAGE_CLASS]
        if len(storage_class) > 253 or not _DNS_SUBDOMAIN.match(storage_class):
            errors.append(f"annotations[{naming.STORAGE_CLASS}]: {storage_class!r} is not a storage class name")
        volume["storageClassName"] = storage_class
    return volume


def _reserved(where: str, keys: Mapping[str, str], errors: list[str]) -> None:
    for key in sorted(set(keys) & (naming.GLUE_KEYS | naming.HOOK_KEYS)):
        errors.append(f"{where}[{key}]: reserved, set by the glue or the hooks")


def _depends_on(where: str, task: dict, workflow: dict, task_names: dict[str, str], invalid: list[str],
                unsupported: list[str]) -> list[str]:
    """The task's dependencies (DECICE task ids) as translated task names, each once."""
    kinds = {t["id"]: t["type"] for t in workflow["tasks"]}
    depends_on: list[str] = []
    for j, dep in enumerate(task.get("dependencies") or []):
        if dep == task["id"]:
            invalid.append(f"{where}.dependencies[{j}]: a task cannot depend on itself")
        elif kinds.get(dep) == K8S_RESOURCE:
            unsupported.append(f"{where}.dependencies[{j}]: {dep}: is a k8s_resource task, which is not supported")
        elif dep not in task_names:
            invalid.append(f"{where}.dependencies[{j}]: {dep}: no such task")
        elif task_names[dep] not in depends_on:
            depends_on.append(task_names[dep])
    return depends_on


def _task(
    i: int, task: dict, workflow: dict, task_names: dict[str, str], nodes: dict[str, list[str]],
    volume: dict | None, invalid: list[str], unsupported: list[str],
) -> dict[str, Any] | None:
    where = f"tasks[{i}]"
    kind = task["type"]
    if kind == K8S_RESOURCE:
        unsupported.append(
            f"{where}.type: k8s_resource tasks are not supported (task {task['name']!r}, id {task['id']}): "
            "the DeciceJob controller creates only its own kinds of children"
        )
        return None
    if not task.get("image"):
        invalid.append(f"{where}.image: required for {kind} tasks")
    out: dict[str, Any] = {"name": task_names[task["id"]]}
    if kind == HPC_JOB:
        out["runtime"] = "volcano"
    out["image"] = task.get("image") or ""
    if task.get("command_str"):
        try:
            out["command"] = split_command(task["command_str"])
        except ValueError as exc:
            invalid.append(f"{where}.command_str: {exc}")
    working_dir = (workflow.get("hpc_context") or {}).get("default_working_dir")
    if kind == HPC_JOB and working_dir:
        out["workingDir"] = working_dir
    if task.get("env"):
        out["env"] = [{k: v for k, v in e.items() if v is not None} for e in task["env"]]
    resources = {
        key: task[field]
        for key, field in (("cpu", "required_cpu"), ("memory", "required_memory"), ("gpu", "required_gpu"))
        if task.get(field) is not None and task[field] != 0
    }
    if resources:
        out["resources"] = resources
    out["replicas"] = task.get("replicas") or 1
    out["restartPolicy"] = "Always" if kind == DEPLOYMENT else "Never"
    if volume is not None:
        out["volumeMounts"] = [{"volume": naming.WORK_VOLUME, "mountPath": naming.WORK_MOUNT_PATH}]
    if task["id"] in nodes:
        out["placement"] = {"nodes": list(nodes[task["id"]])}
    if depends_on := _depends_on(where, task, workflow, task_names, invalid, unsupported):
        out["dependsOn"] = depends_on
    labels, annotations = task.get("labels") or {}, task.get("annotations") or {}
    _reserved(f"{where}.labels", labels, invalid)
    _reserved(f"{where}.annotations", annotations, invalid)
    out["labels"] = {**labels, naming.WORKFLOW_ID: workflow["id"], naming.TASK_ID: task["id"]}
    out["annotations"] = {**annotations, naming.TASK_ID: task["id"], naming.DISPLAY_NAME: task["name"]}
    return out


def _metadata(workflow: dict, name: str, namespace: str, errors: list[str]) -> dict[str, Any]:
    annotations = dict(workflow.get("annotations") or {})
    _reserved("annotations", annotations, errors)
    labels = {naming.WORKFLOW_ID: workflow["id"]}
    annotations.update({naming.WORKFLOW_ID: workflow["id"], naming.DISPLAY_NAME: workflow["name"]})
    if workflow.get("user_id"):
        labels[naming.USER_ID] = annotations[naming.USER_ID] = workflow["user_id"]
    username = (workflow.get("hpc_context") or {}).get("platform_username")
    if username:
        annotations[naming.HPC_USER] = username
    return {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations}


def translate(workflow: Mapping[str, Any], schedule: Mapping[str, Any] | None = None, *,
              namespace: str = "default") -> dict:
    """A DECICE workflow (and the scheduler's placements) as one DeciceJob manifest.

    Raises :class:`InvalidWorkflow` listing every problem, or :class:`UnsupportedWorkflow` when
    the workflow is valid but asks for something a DeciceJob cannot express."""
    if not isinstance(namespace, str) or len(namespace) > 63 or not _NAMESPACE.match(namespace):
        raise InvalidInput([f"namespace: {namespace!r} is not a namespace name"])
    loaded = _load(WorkflowSchema(), workflow, "workflow")
    invalid: list[str] = []
    unsupported: list[str] = []
    ids = [t["id"] for t in loaded["tasks"]]
    for ident in sorted({i for i in ids if ids.count(i) > 1}):
        invalid.append(f"tasks: task id {ident} is used more than once")
    nodes = _placements(schedule, loaded, invalid)
    volume = _storage(loaded.get("annotations") or {}, invalid)
    job = naming.job_name(loaded["name"], loaded["id"])
    runnable = [(t["id"], t["name"]) for t in loaded["tasks"] if t["type"] != K8S_RESOURCE]
    task_names = naming.task_names(runnable, job)
    tasks = [_task(i, t, loaded, task_names, nodes, volume, invalid, unsupported) for i, t in enumerate(loaded["tasks"])]
    manifest: dict[str, Any] = {
        "apiVersion": names.API_VERSION,
        "kind": names.KIND,
        "metadata": _metadata(loaded, job, namespace, invalid),
        "spec": {"tasks": [t for t in tasks if t is not None]},
    }
    if volume is not None:
        manifest["spec"]["volumes"] = [volume]
    if invalid:
        raise InvalidWorkflow(invalid + unsupported)
    if unsupported:
        raise UnsupportedWorkflow(unsupported)
    try:
        parse_job(manifest)
    except InvalidSpec as exc:
        raise InvalidWorkflow([f"the translated DeciceJob is invalid: {e}" for e in exc.errors]) from None
    return manifest
