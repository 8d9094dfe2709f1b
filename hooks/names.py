"""Deterministic names and labels of everything a DeciceJob owns.

Every derived name is a pure function of the job, task and volume names, so
the same spec always yields the same children.  The length limits below are
the ones the CRD enforces (``crds/decicejob.yaml``); they keep every derived
name a valid DNS label: the Pod host name ``<task>-<index>``, the headless
Service ``<job>``, the Volcano Job ``<job>-vc`` and the host names Volcano
derives from it (``<job>-vc-<task>-<index>``), and the Sedna resource ``<job>``
with the names Sedna derives from it (see ``sedna_name``).
"""

from __future__ import annotations

GROUP = "dev.decice.com"
API_VERSION = f"{GROUP}/v1alpha1"
KIND = "DeciceJob"

JOB_NAME_MAX = 40
TASK_NAME_MAX = 40
JOB_AND_TASK_NAME_MAX = 50
VOLUME_NAME_MAX = 40
REPLICAS_MAX = 10000

DNS_LABEL_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
DNS_LABEL_MAX = 63

SEDNA_SUFFIX_MAX = len("-aggregation")
"""The longest suffix Sedna appends to its resource's name where the result must be a DNS label
or a label value: the aggregation Service of a FederatedLearningJob (``<name>-aggregation``);
the others are ``<name>-cloud`` (Service) and ``<name>-Cloud-svc`` / ``<name>-Edge-svc`` (label
values) of a JointInferenceService.  Pod names (``<name>-<worker>-<random>``) only need to be
DNS subdomains."""

LABEL_JOB = f"{GROUP}/job-name"
LABEL_TASK = f"{GROUP}/task-name"
LABEL_INDEX = f"{GROUP}/task-index"
LABEL_ATTEMPT = f"{GROUP}/attempt"
LABEL_VOLUME = f"{GROUP}/volume-name"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "decice-hooks"


def service_name(job: str) -> str:
    """The job's headless Service; also every pod's DNS subdomain."""
    return job


def pod_name(job: str, task: str, index: int, attempt: int = 0) -> str:
    """Pod of one replica; attempt N > 0 is the N-th replacement after a failure."""
    base = f"{job}-{task}-{index}"
    return base if attempt == 0 else f"{base}-{attempt}"


def host_name(task: str, index: int) -> str:
    return f"{task}-{index}"


def sedna_name(job: str) -> str:
    """The Sedna resource a sedna job becomes (one per job, whatever its kind)."""
    return job


def claim_name(job: str, volume: str) -> str:
    return f"{job}-{volume}"


def volcano_job_name(job: str) -> str:
    """The one Volcano Job of a DeciceJob; Volcano names its pods ``<this>-<task>-<i>``, its
    headless Service (svc plugin) after it and its hosts ConfigMap ``<this>-svc``."""
    return f"{job}-vc"


def edge_application_name(job: str, task: str) -> str:
    """The EdgeApplication of a KubeEdge service task, and the Deployment it wraps; KubeEdge
    names the Deployment of each node group ``<this>-<node group>``."""
    return f"{job}-{task}"


def job_labels(job: str) -> dict[str, str]:
    return {LABEL_JOB: job, LABEL_MANAGED_BY: MANAGED_BY}


def task_labels(job: str, task: str) -> dict[str, str]:
    return {LABEL_JOB: job, LABEL_MANAGED_BY: MANAGED_BY, LABEL_TASK: task}
