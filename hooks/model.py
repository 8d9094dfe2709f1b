"""The DeciceJob spec model: parsed and validated once, used everywhere.

``parse_job`` turns a DeciceJob object (a dict, as the API server or a YAML
file gives it) into frozen dataclasses, applying the same defaults as the CRD
and checking the same cross-field rules as its CEL validations, plus what CEL
cannot express (dependency cycles).  The hooks, ``decice render`` and the glue
all go through it.  Kubernetes structures the job only passes through (env
entries, tolerations) stay plain dicts.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from marshmallow import EXCLUDE, RAISE, Schema, ValidationError, fields, post_load, validate

from hooks import names

RUNTIMES = ("kubernetes", "volcano", "kubeedge", "sedna")
TASK_RUNTIMES = ("kubernetes", "volcano", "kubeedge")
RESTART_POLICIES = ("Never", "OnFailure", "Always")
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
PROTOCOLS = ("TCP", "UDP", "SCTP")
GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_BACKOFF_LIMIT = 3
LABEL_VALUE_MAX = 63
ANNOTATION_VALUE_MAX = 262144

SEDNA_KINDS = ("JointInferenceService", "FederatedLearningJob", "IncrementalLearningJob", "LifelongLearningJob")
SEDNA_LEARNING_KINDS = ("IncrementalLearningJob", "LifelongLearningJob")
SEDNA_ROLES = ("edge", "cloud", "aggregation", "training", "train", "eval", "deploy")
TRIGGER_OPERATORS = (">", ">=", "<", "<=", "==", "!=")
DEFAULT_TRAIN_PROB = 0.8
DEFAULT_POLL_PERIOD_SECONDS = 60
REQUIRED, OPTIONAL, UNUSED = "required", "optional", "unused"

QUANTITY_PATTERN = r"^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|[KMGTPE]i|[numkMGTPE])?$"
_QUANTITY = re.compile(QUANTITY_PATTERN)
_DNS_LABEL = re.compile(names.DNS_LABEL_PATTERN)
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_CLOCK_TIME = re.compile(r"^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$")


class InvalidSpec(Exception):
    """The DeciceJob cannot be turned into children; ``errors`` says why, one line each."""

    def __init__(self, errors: list[str]):
        super().__init__("; ".join(errors))
        self.errors = errors


# --- typed model -------------------------------------------------------------


@dataclass(frozen=True)
class Resources:
    requests: dict[str, str] = field(default_factory=dict)
    limits: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Port:
    container_port: int
    protocol: str = "TCP"
    name: str | None = None


@dataclass(frozen=True)
class VolumeMount:
    volume: str
    mount_path: str
    sub_path: str | None = None
    read_only: bool = False


@dataclass(frozen=True)
class NodeGroup:
    name: str
    replicas: int


@dataclass(frozen=True)
class Placement:
    nodes: tuple[str, ...] = ()
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict, ...] = ()
    node_groups: tuple[NodeGroup, ...] = ()

    def node_for(self, index: int) -> str | None:
        """The scheduler's node for replica ``index`` (replica i runs on nodes[i % len])."""
        return self.nodes[index % len(self.nodes)] if self.nodes else None


@dataclass(frozen=True)
class Task:
    name: str
    image: str
    runtime: str = "kubernetes"
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: tuple[dict, ...] = ()
    working_dir: str | None = None
    resources: Resources = field(default_factory=Resources)
    replicas: int = 1
    restart_policy: str = "Never"
    ports: tuple[Port, ...] = ()
    volume_mounts: tuple[VolumeMount, ...] = ()
    placement: Placement = field(default_factory=Placement)
    depends_on: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    service_account_name: str | None = None
    role: str | None = None
    model: str | None = None
    dataset: str | None = None

    @property
    def is_service(self) -> bool:
        """A long-running task (DECICE ``deployment``): it never succeeds, it is ready or not."""
        return self.restart_policy == "Always"


@dataclass(frozen=True)
class Volume:
    name: str
    size: str | None = None
    access_modes: tuple[str, ...] = ("ReadWriteOnce",)
    storage_class_name: str | None = None
    existing_claim: str | None = None


@dataclass(frozen=True)
class SednaRole:
    """What a task with this role is in a Sedna kind: whether it names a Sedna ``model`` /
    ``dataset``; whether the role may have several tasks and replicas (``many``); whether its
    worker runs at the edge, beside a Sedna LocalController (``edge``), and must be given a
    node there (``pinned``: Sedna hands the job to the LocalController of that node); whether
    Sedna waits for it to finish (``finite``: restartPolicy Always would never let it); and
    whether Sedna runs it as a Deployment (``service``)."""

    model: str = UNUSED
    dataset: str = UNUSED
    many: bool = False
    edge: bool = False
    pinned: bool = False
    finite: bool = False
    service: bool = False


SEDNA_ROLE_RULES: dict[str, dict[str, SednaRole]] = {
    "JointInferenceService": {
        "edge": SednaRole(model=REQUIRED, edge=True, pinned=True, service=True),
        "cloud": SednaRole(model=REQUIRED, service=True),
    },
    "FederatedLearningJob": {
        "aggregation": SednaRole(model=REQUIRED, finite=True),
        "training": SednaRole(dataset=REQUIRED, many=True, edge=True, pinned=True, finite=True),
    },
    "IncrementalLearningJob": {
        "train": SednaRole(model=REQUIRED, dataset=REQUIRED, edge=True, finite=True),
        "eval": SednaRole(model=OPTIONAL, edge=True, finite=True),
        "deploy": SednaRole(model=REQUIRED, edge=True),
    },
    "LifelongLearningJob": {
        "train": SednaRole(dataset=REQUIRED, edge=True, finite=True),
        "eval": SednaRole(edge=True, finite=True),
        "deploy": SednaRole(edge=True),
    },
}
"""Roles of each Sedna kind (in the order the kind lists its workers), checked by the model and,
equally, by the CRD's CEL rules."""

SEDNA_SETTINGS: dict[str, tuple[str, tuple[str, ...], bool]] = {
    "hardExampleMining": ("hard_example_mining", ("JointInferenceService", "IncrementalLearningJob"), True),
    "pretrainedModel": ("pretrained_model", ("FederatedLearningJob",), False),
    "transmitter": ("transmitter", ("FederatedLearningJob",), False),
    "trainProb": ("train_prob", SEDNA_LEARNING_KINDS, False),
    "outputDir": ("output_dir", SEDNA_LEARNING_KINDS, True),
    "credentialName": ("credential_name", SEDNA_LEARNING_KINDS, False),
    "trainTrigger": ("train_trigger", SEDNA_LEARNING_KINDS, True),
    "deployTrigger": ("deploy_trigger", ("IncrementalLearningJob",), True),
    "modelHotUpdate": ("model_hot_update", ("IncrementalLearningJob",), False),
}
"""``spec.sedna`` field → (attribute of ``Sedna``, kinds using it, required for those kinds)."""


@dataclass(frozen=True)
class Trigger:
    """When Sedna starts a stage: ``metric operator threshold``, checked every
    ``check_period_seconds``, only inside the daily ``timer`` window (start, end) if given."""

    metric: str
    operator: str
    threshold: float
    check_period_seconds: int | None = None
    timer: tuple[str, str] | None = None


@dataclass(frozen=True)
class HardExampleMining:
    name: str
    parameters: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Transmitter:
    """How federated-learning workers exchange weights: ``ws`` (websocket through the
    aggregation worker) or ``s3`` (through object storage at ``aggregation_data_path``)."""

    type: str = "ws"
    aggregation_data_path: str | None = None
    credential_name: str | None = None


@dataclass(frozen=True)
class ModelHotUpdate:
    poll_period_seconds: int = DEFAULT_POLL_PERIOD_SECONDS


@dataclass(frozen=True)
class Sedna:
    """``spec.sedna``: the Sedna kind the job becomes and its settings no task carries."""

    kind: str
    hard_example_mining: HardExampleMining | None = None
    pretrained_model: str | None = None
    transmitter: Transmitter | None = None
    train_prob: float | None = None
    output_dir: str | None = None
    credential_name: str | None = None
    train_trigger: Trigger | None = None
    deploy_trigger: Trigger | None = None
    model_hot_update: ModelHotUpdate | None = None

    def role(self, name: str | None) -> SednaRole | None:
        return SEDNA_ROLE_RULES[self.kind].get(name or "")


@dataclass(frozen=True)
class JobSpec:
    tasks: tuple[Task, ...]
    runtime: str = "kubernetes"
    volumes: tuple[Volume, ...] = ()
    suspend: bool = False
    backoff_limit: int = DEFAULT_BACKOFF_LIMIT
    active_deadline_seconds: int | None = None
    pending_deadline_seconds: int | None = None
    ttl_seconds_after_finished: int | None = None
    queue: str | None = None
    priority_class_name: str | None = None
    scheduler_name: str | None = None
    min_available: int | None = None
    sedna: Sedna | None = None

    def task(self, name: str) -> Task:
        return next(t for t in self.tasks if t.name == name)

    def volume(self, name: str) -> Volume:
        return next(v for v in self.volumes if v.name == name)


@dataclass(frozen=True)
class DeciceJob:
    name: str
    namespace: str
    spec: JobSpec
    uid: str = ""
    generation: int = 0


# --- marshmallow schemas -----------------------------------------------------


def _quantity(value: str) -> None:
    if not _QUANTITY.match(value):
        raise ValidationError(f"{value!r} is not a Kubernetes quantity (e.g. 500m, 2, 4Gi)")


def _dns_label(max_length: int) -> validate.Validator:
    return validate.And(
        validate.Length(min=1, max=max_length),
        validate.Regexp(_DNS_LABEL, error="must be a DNS label: lowercase letters, digits and '-', starting with a letter"),
    )


class Quantity(fields.Field):
    """A Kubernetes quantity given as a string or a number; always loaded as a string."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ValidationError("must be a quantity: a string like '500m' or a number")
        text = value if isinstance(value, str) else format(value, "g") if isinstance(value, float) else str(value)
        _quantity(text)
        return text


def _string_map(max_value: int | None = None) -> fields.Dict:
    values = fields.String(validate=validate.Length(max=max_value)) if max_value else fields.String()
    return fields.Dict(keys=fields.String(), values=values, load_default=dict)


def _quantity_map() -> fields.Dict:
    return fields.Dict(keys=fields.String(validate=validate.Length(min=1)), values=Quantity(), load_default=dict)


class _Strict(Schema):
    class Meta:
        unknown = RAISE


class ResourcesSchema(_Strict):
    cpu = Quantity()
    memory = Quantity()
    gpu = fields.Integer(strict=True, validate=validate.Range(min=0))
    extended = _quantity_map()
    requests = fields.Dict(keys=fields.String(), values=Quantity())
    limits = fields.Dict(keys=fields.String(), values=Quantity())

    @post_load
    def make(self, data: dict, **_: Any) -> Resources:
        """Simple fields apply to requests and limits; requests = limits unless both maps are given."""
        base = dict(data.get("extended", {}))
        for key, resource in (("cpu", "cpu"), ("memory", "memory")):
            if key in data:
                base[resource] = data[key]
        if data.get("gpu"):
            base[GPU_RESOURCE] = str(data["gpu"])
        requests, limits = data.get("requests"), data.get("limits")
        if requests is not None and limits is not None:
            return Resources(requests={**base, **requests}, limits={**base, **limits})
        merged = {**base, **(requests or limits or {})}
        return Resources(requests=merged, limits=dict(merged))


class PortSchema(_Strict):
    containerPort = fields.Integer(required=True, strict=True, validate=validate.Range(min=1, max=65535))
    protocol = fields.String(load_default="TCP", validate=validate.OneOf(PROTOCOLS))
    name = fields.String(validate=_dns_label(15))

    @post_load
    def make(self, data: dict, **_: Any) -> Port:
        return Port(container_port=data["containerPort"], protocol=data["protocol"], name=data.get("name"))


class VolumeMountSchema(_Strict):
    volume = fields.String(required=True)
    mountPath = fields.String(required=True, validate=validate.Regexp(r"^/", error="must be an absolute path"))
    subPath = fields.String()
    readOnly = fields.Boolean(load_default=False)

    @post_load
    def make(self, data: dict, **_: Any) -> VolumeMount:
        return VolumeMount(data["volume"], data["mountPath"], data.get("subPath"), data["readOnly"])


class NodeGroupSchema(_Strict):
    name = fields.String(required=True, validate=validate.Length(min=1))
    replicas = fields.Integer(required=True, strict=True, validate=validate.Range(min=0))

    @post_load
    def make(self, data: dict, **_: Any) -> NodeGroup:
        return NodeGroup(**data)


class TolerationSchema(_Strict):
    key = fields.String()
    operator = fields.String(validate=validate.OneOf(("Exists", "Equal")))
    value = fields.String()
    effect = fields.String(validate=validate.OneOf(("NoSchedule", "PreferNoSchedule", "NoExecute")))
    tolerationSeconds = fields.Integer(strict=True)


class PlacementSchema(_Strict):
    nodes = fields.List(fields.String(validate=validate.Regexp(_DNS_SUBDOMAIN, error="must be a node name")), load_default=list)
    nodeSelector = _string_map()
    tolerations = fields.List(fields.Nested(TolerationSchema), load_default=list)
    nodeGroups = fields.List(fields.Nested(NodeGroupSchema), load_default=list)

    @post_load
    def make(self, data: dict, **_: Any) -> Placement:
        return Placement(
            nodes=tuple(data["nodes"]),
            node_selector=data["nodeSelector"],
            tolerations=tuple(data["tolerations"]),
            node_groups=tuple(data["nodeGroups"]),
        )


class EnvVarSchema(_Strict):
    name = fields.String(required=True, validate=validate.Regexp(_ENV_NAME, error="must be an environment variable name"))
    value = fields.String()
    valueFrom = fields.Dict()


def _object_name(what: str) -> validate.Validator:
    return validate.And(
        validate.Length(min=1, max=253),
        validate.Regexp(_DNS_SUBDOMAIN, error=f"must be the name of {what} (a DNS subdomain)"),
    )


class Number(fields.Field):
    """A JSON number, kept as given (an integer stays an integer); strings and booleans are refused."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValidationError("must be a number")
        return value


class TimerSchema(_Strict):
    start = fields.String(required=True, validate=validate.Regexp(_CLOCK_TIME, error="must be a time of day HH:MM"))
    end = fields.String(required=True, validate=validate.Regexp(_CLOCK_TIME, error="must be a time of day HH:MM"))


class TriggerSchema(_Strict):
    metric = fields.String(required=True, validate=validate.Length(min=1, max=253))
    operator = fields.String(required=True, validate=validate.OneOf(TRIGGER_OPERATORS))
    threshold = Number(required=True)
    checkPeriodSeconds = fields.Integer(strict=True, validate=validate.Range(min=1, max=86400))
    timer = fields.Nested(TimerSchema)

    @post_load
    def make(self, data: dict, **_: Any) -> Trigger:
        timer = data.get("timer")
        return Trigger(
            metric=data["metric"],
            operator=data["operator"],
            threshold=data["threshold"],
            check_period_seconds=data.get("checkPeriodSeconds"),
            timer=(timer["start"], timer["end"]) if timer else None,
        )


class HardExampleMiningSchema(_Strict):
    name = fields.String(required=True, validate=validate.Length(min=1, max=63))
    parameters = fields.Dict(keys=fields.String(validate=validate.Length(min=1, max=63)),
                             values=fields.String(validate=validate.Length(max=256)), load_default=dict,
                             validate=validate.Length(max=32))

    @post_load
    def make(self, data: dict, **_: Any) -> HardExampleMining:
        return HardExampleMining(**data)


class TransmitterSchema(_Strict):
    type = fields.String(load_default="ws", validate=validate.OneOf(("ws", "s3")))
    aggregationDataPath = fields.String(validate=validate.Length(min=1, max=1024))
    credentialName = fields.String(validate=_object_name("a Secret"))

    @post_load
    def make(self, data: dict, **_: Any) -> Transmitter:
        return Transmitter(data["type"], data.get("aggregationDataPath"), data.get("credentialName"))


class ModelHotUpdateSchema(_Strict):
    pollPeriodSeconds = fields.Integer(load_default=DEFAULT_POLL_PERIOD_SECONDS, strict=True,
                                       validate=validate.Range(min=1, max=86400))

    @post_load
    def make(self, data: dict, **_: Any) -> ModelHotUpdate:
        return ModelHotUpdate(data["pollPeriodSeconds"])


class SednaSchema(_Strict):
    kind = fields.String(required=True, validate=validate.OneOf(SEDNA_KINDS))
    hardExampleMining = fields.Nested(HardExampleMiningSchema)
    pretrainedModel = fields.String(validate=_object_name("a Sedna Model"))
    transmitter = fields.Nested(TransmitterSchema)
    trainProb = Number(validate=validate.Range(min=0, max=1, min_inclusive=False))
    outputDir = fields.String(validate=validate.Length(min=1, max=1024))
    credentialName = fields.String(validate=_object_name("a Secret"))
    trainTrigger = fields.Nested(TriggerSchema)
    deployTrigger = fields.Nested(TriggerSchema)
    modelHotUpdate = fields.Nested(ModelHotUpdateSchema)

    @post_load
    def make(self, data: dict, **_: Any) -> Sedna:
        """Defaults that depend on the kind: the train/test split of the learning kinds, and
        the websocket transmitter of federated learning."""
        kind = data["kind"]
        values = {attr: data.get(key) for key, (attr, _, _) in SEDNA_SETTINGS.items()}
        if kind in SEDNA_LEARNING_KINDS and values["train_prob"] is None:
            values["train_prob"] = DEFAULT_TRAIN_PROB
        if kind == "FederatedLearningJob" and values["transmitter"] is None:
            values["transmitter"] = Transmitter()
        return Sedna(kind=kind, **values)


class TaskSchema(_Strict):
    name = fields.String(required=True, validate=_dns_label(names.TASK_NAME_MAX))
    runtime = fields.String(validate=validate.OneOf(TASK_RUNTIMES))
    image = fields.String(required=True, validate=validate.Length(min=1))
    command = fields.List(fields.String(), load_default=list)
    args = fields.List(fields.String(), load_default=list)
    env = fields.List(fields.Nested(EnvVarSchema), load_default=list)
    workingDir = fields.String()
    resources = fields.Nested(ResourcesSchema, load_default=Resources)
    replicas = fields.Integer(load_default=1, strict=True, validate=validate.Range(min=1, max=names.REPLICAS_MAX))
    restartPolicy = fields.String(load_default="Never", validate=validate.OneOf(RESTART_POLICIES))
    ports = fields.List(fields.Nested(PortSchema), load_default=list)
    volumeMounts = fields.List(fields.Nested(VolumeMountSchema), load_default=list)
    placement = fields.Nested(PlacementSchema, load_default=Placement)
    dependsOn = fields.List(fields.String(), load_default=list)
    labels = _string_map(LABEL_VALUE_MAX)
    annotations = _string_map(ANNOTATION_VALUE_MAX)
    serviceAccountName = fields.String(validate=validate.Regexp(_DNS_SUBDOMAIN, error="must be a service account name"))
    role = fields.String(validate=validate.OneOf(SEDNA_ROLES))
    model = fields.String(validate=_object_name("a Sedna Model"))
    dataset = fields.String(validate=_object_name("a Sedna Dataset"))

    @post_load
    def make(self, data: dict, **_: Any) -> Task:
        return Task(
            name=data["name"],
            image=data["image"],
            runtime=data.get("runtime", ""),
            command=tuple(data["command"]),
            args=tuple(data["args"]),
            env=tuple(data["env"]),
            working_dir=data.get("workingDir"),
            resources=data["resources"],
            replicas=data["replicas"],
            restart_policy=data["restartPolicy"],
            ports=tuple(data["ports"]),
            volume_mounts=tuple(data["volumeMounts"]),
            placement=data["placement"],
            depends_on=tuple(data["dependsOn"]),
            labels=data["labels"],
            annotations=data["annotations"],
            service_account_name=data.get("serviceAccountName"),
            role=data.get("role"),
            model=data.get("model"),
            dataset=data.get("dataset"),
        )


class VolumeSchema(_Strict):
    name = fields.String(required=True, validate=_dns_label(names.VOLUME_NAME_MAX))
    size = Quantity()
    accessModes = fields.List(fields.String(validate=validate.OneOf(ACCESS_MODES)), load_default=lambda: ["ReadWriteOnce"])
    storageClassName = fields.String()
    existingClaim = fields.String(validate=validate.Regexp(_DNS_SUBDOMAIN, error="must be a claim name"))

    @post_load
    def make(self, data: dict, **_: Any) -> Volume:
        return Volume(
            name=data["name"],
            size=data.get("size"),
            access_modes=tuple(data["accessModes"]),
            storage_class_name=data.get("storageClassName"),
            existing_claim=data.get("existingClaim"),
        )


class JobSpecSchema(_Strict):
    runtime = fields.String(load_default="kubernetes", validate=validate.OneOf(RUNTIMES))
    tasks = fields.List(fields.Nested(TaskSchema), required=True, validate=validate.Length(min=1, max=64))
    volumes = fields.List(fields.Nested(VolumeSchema), load_default=list, validate=validate.Length(max=16))
    suspend = fields.Boolean(load_default=False)
    backoffLimit = fields.Integer(load_default=DEFAULT_BACKOFF_LIMIT, strict=True, validate=validate.Range(min=0, max=1000))
    activeDeadlineSeconds = fields.Integer(strict=True, validate=validate.Range(min=1))
    pendingDeadlineSeconds = fields.Integer(strict=True, validate=validate.Range(min=1))
    ttlSecondsAfterFinished = fields.Integer(strict=True, validate=validate.Range(min=0))
    queue = fields.String(validate=validate.Length(min=1))
    priorityClassName = fields.String(validate=validate.Length(min=1))
    schedulerName = fields.String(validate=validate.Length(min=1))
    minAvailable = fields.Integer(strict=True, validate=validate.Range(min=1))
    sedna = fields.Nested(SednaSchema)

    @post_load
    def make(self, data: dict, **_: Any) -> JobSpec:
        runtime = data["runtime"]
        sedna = data.get("sedna")
        tasks = tuple(t if t.runtime else replace(t, runtime=runtime) for t in data["tasks"])
        if runtime == "sedna" and sedna is not None:
            tasks = tuple(_as_sedna_worker(sedna, t) for t in tasks)
        return JobSpec(
            tasks=tasks,
            runtime=runtime,
            volumes=tuple(data["volumes"]),
            suspend=data["suspend"],
            backoff_limit=data["backoffLimit"],
            active_deadline_seconds=data.get("activeDeadlineSeconds"),
            pending_deadline_seconds=data.get("pendingDeadlineSeconds"),
            ttl_seconds_after_finished=data.get("ttlSecondsAfterFinished"),
            queue=data.get("queue"),
            priority_class_name=data.get("priorityClassName"),
            scheduler_name=data.get("schedulerName"),
            min_available=data.get("minAvailable"),
            sedna=sedna,
        )


def _as_sedna_worker(sedna: Sedna, task: Task) -> Task:
    """Sedna runs joint-inference workers as Deployments, whose pods always restart: such tasks
    are service tasks whatever their restartPolicy (which defaults to Never)."""
    role = sedna.role(task.role)
    return replace(task, restart_policy="Always") if role is not None and role.service else task


class MetadataSchema(Schema):
    class Meta:
        unknown = EXCLUDE

    name = fields.String(required=True, validate=_dns_label(names.JOB_NAME_MAX))
    namespace = fields.String(load_default="default", validate=validate.Length(min=1))
    uid = fields.String(load_default="")
    generation = fields.Integer(load_default=0)


# --- cross-field rules ---------------------------------------------------------


def _cycle(graph: Mapping[str, tuple[str, ...]]) -> list[str]:
    """A cycle in a dependency graph (node → nodes it depends on) as a list of nodes, or []."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(name: str) -> list[str]:
        state[name] = 1
        stack.append(name)
        for dep in graph.get(name, ()):
            if state.get(dep) == 1:
                return stack[stack.index(dep):] + [dep]
            if dep in graph and dep not in state and (found := visit(dep)):
                return found
        stack.pop()
        state[name] = 2
        return []

    for name in graph:
        if name not in state and (found := visit(name)):
            return found
    return []


def _sedna_task_errors(sedna: Sedna, where: str, task: Task) -> list[str]:
    kind = sedna.kind
    role = sedna.role(task.role)
    if role is None:
        roles = ", ".join(SEDNA_ROLE_RULES[kind])
        found = f"role {task.role!r} is not one" if task.role else "a role is required"
        return [f"{where}.role: {found}: the tasks of a {kind} have roles {roles}"]
    errors = []
    for name, need in (("model", role.model), ("dataset", role.dataset)):
        given = getattr(task, name) is not None
        if need == REQUIRED and not given:
            errors.append(f"{where}.{name}: required for role {task.role} of a {kind}")
        elif need == UNUSED and given:
            errors.append(f"{where}.{name}: role {task.role} of a {kind} takes no {name}")
    if task.replicas != 1 and not role.many:
        errors.append(f"{where}.replicas: role {task.role} runs exactly one worker")
    if role.pinned and not task.placement.nodes:
        errors.append(f"{where}.placement.nodes: required for role {task.role}: Sedna pins the worker to its node")
    if role.finite and task.restart_policy == "Always":
        errors.append(f"{where}.restartPolicy: Sedna waits for {task.role} workers to finish, so Always is not allowed")
    if task.depends_on:
        errors.append(f"{where}.dependsOn: Sedna orders the workers of a sedna job itself")
    if task.labels or task.annotations:
        errors.append(f"{where}: labels and annotations cannot reach Sedna's worker pods (Sedna's CRDs drop "
                      "pod template metadata)")
    return errors


def sedna_errors(spec: JobSpec) -> list[str]:
    """The rules of a sedna job: roles per kind, what each role takes, the settings per kind."""
    if spec.runtime != "sedna":
        return []
    sedna = spec.sedna
    if sedna is None:
        return ["spec.sedna: required with runtime sedna (at least its kind)"]
    errors = []
    for i, task in enumerate(spec.tasks):
        errors += _sedna_task_errors(sedna, f"spec.tasks[{i}]", task)
    for name, role in SEDNA_ROLE_RULES[sedna.kind].items():
        count = sum(t.role == name for t in spec.tasks)
        if count == 0 or (count > 1 and not role.many):
            needed = "at least one task" if role.many else "exactly one task"
            errors.append(f"spec.tasks: a {sedna.kind} needs {needed} with role {name}, found {count}")
    for key, (attr, kinds, required) in SEDNA_SETTINGS.items():
        given = getattr(sedna, attr) is not None
        if sedna.kind in kinds and required and not given:
            errors.append(f"spec.sedna.{key}: required for a {sedna.kind}")
        elif sedna.kind not in kinds and given:
            errors.append(f"spec.sedna.{key}: only used by {' and '.join(kinds)}")
    transmitter = sedna.transmitter
    if transmitter is not None and (transmitter.type == "s3") != (transmitter.aggregation_data_path is not None):
        errors.append("spec.sedna.transmitter.aggregationDataPath: required for type s3 and only used by it")
    if transmitter is not None and transmitter.type != "s3" and transmitter.credential_name is not None:
        errors.append("spec.sedna.transmitter.credentialName: only used by type s3")
    return errors


def _grouped_graph(tasks: tuple[Task, ...], runtime: str) -> dict[str, tuple[str, ...]]:
    """The dependency graph with all tasks of ``runtime`` as one node: a Volcano Job starts all
    its tasks together, so nothing outside it may wait for one of them and be awaited by another."""
    group = f"({runtime} tasks)"
    runtimes = {t.name: t.runtime for t in tasks}

    def node(name: str) -> str:
        return group if runtimes.get(name) == runtime else name

    graph: dict[str, tuple[str, ...]] = {}
    for task in tasks:
        deps = tuple(node(d) for d in task.depends_on if node(d) != node(task.name))
        graph[node(task.name)] = graph.get(node(task.name), ()) + deps
    return graph


def cross_field_errors(job_name: str, spec: JobSpec) -> list[str]:
    """Rules over several fields: the CRD's CEL validations, plus cycles, which CEL cannot see."""
    errors: list[str] = []
    task_names = [t.name for t in spec.tasks]
    volume_names = [v.name for v in spec.volumes]
    for kind, seen in (("task", task_names), ("volume", volume_names)):
        for name in sorted({n for n in seen if seen.count(n) > 1}):
            errors.append(f"spec: duplicate {kind} name {name!r}")
    for i, task in enumerate(spec.tasks):
        where = f"spec.tasks[{i}]"
        if len(job_name) + len(task.name) > names.JOB_AND_TASK_NAME_MAX:
            errors.append(
                f"{where}.name: job name and task name together must not exceed "
                f"{names.JOB_AND_TASK_NAME_MAX} characters (derived child names)"
            )
        for j, dep in enumerate(task.depends_on):
            if dep == task.name:
                errors.append(f"{where}.dependsOn[{j}]: a task cannot depend on itself")
            elif dep not in task_names:
                errors.append(f"{where}.dependsOn[{j}]: unknown task {dep!r}")
        for j, mount in enumerate(task.volume_mounts):
            if mount.volume not in volume_names:
                errors.append(f"{where}.volumeMounts[{j}].volume: unknown volume {mount.volume!r}")
        mount_paths = [m.mount_path for m in task.volume_mounts]
        if len(set(mount_paths)) != len(mount_paths):
            errors.append(f"{where}.volumeMounts: duplicate mountPath")
        if spec.runtime != "sedna" and (task.role or task.model or task.dataset):
            errors.append(f"{where}: role, model and dataset are only allowed with runtime sedna")
        if spec.runtime == "sedna" and task.runtime != "sedna":
            errors.append(f"{where}.runtime: tasks of a sedna job cannot override the runtime")
    if cycle := _cycle({t.name: t.depends_on for t in spec.tasks}):
        errors.append(f"spec.tasks: dependency cycle {' -> '.join(cycle)}")
    elif cycle := _cycle(_grouped_graph(spec.tasks, "volcano")):
        errors.append(
            "spec.tasks: the volcano tasks start together as one Volcano Job, so a task of another runtime "
            f"cannot both depend on one and be a dependency of one: {' -> '.join(cycle)}"
        )
    for i, volume in enumerate(spec.volumes):
        if (volume.size is None) == (volume.existing_claim is None):
            errors.append(f"spec.volumes[{i}]: exactly one of size and existingClaim must be set")
    total = sum(t.replicas for t in spec.tasks)
    if spec.min_available is not None and spec.min_available > total:
        errors.append(f"spec.minAvailable: {spec.min_available} exceeds the total replicas ({total})")
    if spec.sedna is not None and spec.runtime != "sedna":
        errors.append("spec.sedna: only allowed with runtime sedna")
    return errors + sedna_errors(spec)


# --- entry point ------------------------------------------------------------------


def error_lines(messages: Any, path: str) -> list[str]:
    """marshmallow's nested error dict as 'path: message' lines."""
    if isinstance(messages, Mapping):
        out: list[str] = []
        for key, value in messages.items():
            sub = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else str(key)
            out.extend(error_lines(value, sub))
        return out
    if isinstance(messages, list) and all(isinstance(m, str) for m in messages):
        return [f"{path}: {m}" for m in messages]
    if isinstance(messages, list):
        return [line for m in messages for line in error_lines(m, path)]
    return [f"{path}: {messages}"]


# Schema instances are reused: building one deep-copies every declared field, which costs
# more than loading a typical spec.  Loading keeps no state in the instance.
_SPEC_SCHEMA = JobSpecSchema()
_METADATA_SCHEMA = MetadataSchema()


def parse_spec(job_name: str, spec: Any) -> JobSpec:
    if not isinstance(spec, Mapping):
        raise InvalidSpec(["spec: must be an object"])
    try:
        parsed = _SPEC_SCHEMA.load(spec)
    except ValidationError as exc:
        raise InvalidSpec(sorted(error_lines(exc.messages, "spec"))) from None
    if errors := cross_field_errors(job_name, parsed):
        raise InvalidSpec(errors)
    return parsed


def parse_job(obj: Any) -> DeciceJob:
    """A DeciceJob object (dict) → DeciceJob, or InvalidSpec listing every problem."""
    if not isinstance(obj, Mapping):
        raise InvalidSpec(["parent: must be an object"])
    try:
        meta = _METADATA_SCHEMA.load(obj.get("metadata") or {})
    except ValidationError as exc:
        raise InvalidSpec(sorted(error_lines(exc.messages, "metadata"))) from None
    spec = parse_spec(meta["name"], obj.get("spec"))
    return DeciceJob(
        name=meta["name"], namespace=meta["namespace"], spec=spec, uid=meta["uid"], generation=meta["generation"]
    )


def memoized_parser(size: int = 512) -> Callable[[Any], DeciceJob]:
    """``parse_job`` remembering its last ``size`` answers, for one hook server.

    Metacontroller sends the same generation of a parent again on every change of its
    children; validating its spec again would be most of the cost of a small sync.  The key
    is everything ``parse_job`` reads (the parent's identity and its spec, as JSON), so a
    changed spec is always parsed afresh; invalid specs are not remembered."""
    import orjson

    @functools.lru_cache(maxsize=size)
    def parse_key(key: bytes) -> DeciceJob:
        return parse_job(orjson.loads(key))

    def parse(obj: Any) -> DeciceJob:
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        if not isinstance(meta, Mapping):
            return parse_job(obj)
        identity = {k: meta[k] for k in ("name", "namespace", "uid", "generation") if k in meta}
        try:
            key = orjson.dumps({"metadata": identity, "spec": obj.get("spec")})
        except TypeError:
            return parse_job(obj)
        return parse_key(key)

    return parse
