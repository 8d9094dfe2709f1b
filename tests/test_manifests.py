"""Static checks of the deployment artefacts: manifests/, crds/kustomization.yaml,
Dockerfile and .dockerignore.

Most tests only parse files. Tests that render with ``kubectl kustomize`` are
skipped when kubectl is not installed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = ROOT / "manifests"
BASE = MANIFESTS / "base"
CRDS = ROOT / "crds"
CRD_FILE = CRDS / "decicejob.yaml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
INSTALL_DOC = ROOT / "docs" / "install.md"

K8S_VERSION = "1.32"
NAMESPACE = "decice-system"
APP = "decice-hooks"
IMAGE = "ghcr.io/decice/decice-hooks"
IMAGE_TAG = "0.1.0"
HOOK_PORT = 8080
SELECTOR = {"app.kubernetes.io/name": APP}
COMMON_LABELS = {"app.kubernetes.io/part-of": "decice"}
METACONTROLLER_NAMESPACE = "metacontroller"

KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
CLUSTER_SCOPED_KINDS = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "CompositeController",
}
# Objects whose schema is not part of Kubernetes itself.
NON_BUILTIN_GROUPS = {"metacontroller.k8s.io", "dev.decice.com"}

KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


# --------------------------------------------------------------------------- helpers


def load_docs(path: Path) -> list:
    with path.open(encoding="utf-8") as fh:
        return [doc for doc in yaml.safe_load_all(fh) if doc is not None]


def load_one(path: Path) -> dict:
    docs = load_docs(path)
    assert len(docs) == 1, f"{path}: expected exactly one YAML document"
    return docs[0]


def yaml_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())


def kustomization_in(directory: Path) -> Path | None:
    for name in KUSTOMIZATION_NAMES:
        if (directory / name).is_file():
            return directory / name
    return None


def kustomization_dirs() -> list[Path]:
    dirs = [MANIFESTS, *(p for p in sorted(MANIFESTS.rglob("*")) if p.is_dir())]
    return [d for d in dirs if kustomization_in(d) is not None]


def is_remote(entry: str) -> bool:
    return "://" in entry or entry.startswith(("github.com/", "git@"))


def listed_resource_files(kustomization_dir: Path) -> list[Path]:
    """Plain files named in ``resources:`` (directories are other kustomizations)."""
    kust = load_one(kustomization_in(kustomization_dir))
    files = []
    for entry in kust.get("resources") or []:
        path = (kustomization_dir / entry).resolve()
        if not is_remote(entry) and path.is_file():
            files.append(path)
    return files


def api_group(obj: dict) -> str:
    api_version = obj["apiVersion"]
    return api_version.split("/")[0] if "/" in api_version else ""


def selector_matches(match_labels: dict, labels: dict) -> bool:
    return bool(match_labels) and all(labels.get(k) == v for k, v in match_labels.items())


@pytest.fixture(scope="module")
def base_objects() -> list[dict]:
    objs = []
    for path in listed_resource_files(BASE):
        objs.extend(load_docs(path))
    assert objs, "manifests/base lists no resource files"
    return objs


@pytest.fixture(scope="module")
def get(base_objects):
    index = {(o["kind"], o["metadata"]["name"]): o for o in base_objects}

    def _get(kind: str, name: str) -> dict:
        assert (kind, name) in index, f"{kind}/{name} missing from manifests/base"
        return index[(kind, name)]

    return _get


@pytest.fixture(scope="module")
def deployment(get) -> dict:
    return get("Deployment", APP)


@pytest.fixture(scope="module")
def pod_spec(deployment) -> dict:
    return deployment["spec"]["template"]["spec"]


@pytest.fixture(scope="module")
def container(pod_spec) -> dict:
    containers = pod_spec["containers"]
    assert len(containers) == 1
    return containers[0]


@pytest.fixture(scope="module")
def compositecontroller(get) -> dict:
    return get("CompositeController", "decicejob-controller")


# --------------------------------------------------------------------------- kustomize layout


@pytest.mark.parametrize("path", yaml_files(MANIFESTS), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_yaml_file_parses(path):
    load_docs(path)


def test_root_kustomization_installs_base():
    kust = load_one(kustomization_in(MANIFESTS))
    assert kust["kind"] == "Kustomization"
    assert kust["resources"] == ["base"]


@pytest.mark.parametrize("kdir", kustomization_dirs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_kustomization_entries_exist(kdir):
    kust = load_one(kustomization_in(kdir))
    assert kust.get("apiVersion", "").startswith("kustomize.config.k8s.io/")
    entries = list(kust.get("resources") or []) + list(kust.get("components") or [])
    for entry in entries:
        if not is_remote(entry):
            assert (kdir / entry).exists(), f"{kdir}: {entry} does not exist"
    for patch in kust.get("patches") or []:
        if "path" in patch:
            assert (kdir / patch["path"]).is_file(), f"{kdir}: patch {patch['path']} missing"


def test_base_has_no_unlisted_resource_files():
    listed = set(listed_resource_files(BASE))
    on_disk = {p.resolve() for p in yaml_files(BASE) if p.name not in KUSTOMIZATION_NAMES}
    assert on_disk == listed


def test_base_includes_crds_and_common_labels():
    kust = load_one(kustomization_in(BASE))
    assert "../../crds" in kust["resources"]
    # No `namespace:` transformer: it would stamp a namespace onto the
    # cluster-scoped CompositeController.
    assert "namespace" not in kust
    pairs = {}
    for entry in kust.get("labels") or []:
        assert not entry.get("includeSelectors"), "selectors are immutable; keep them minimal"
        pairs.update(entry["pairs"])
    assert pairs == COMMON_LABELS


def test_crds_kustomization_lists_decicejob():
    kust = load_one(CRDS / "kustomization.yaml")
    assert kust["kind"] == "Kustomization"
    assert kust["resources"] == ["decicejob.yaml"]


def test_crd_matches_composite_controller_parent(compositecontroller):
    if not CRD_FILE.is_file():
        pytest.skip("crds/decicejob.yaml not written yet")
    crds = [d for d in load_docs(CRD_FILE) if d.get("kind") == "CustomResourceDefinition"]
    assert len(crds) == 1
    crd = crds[0]
    parent = compositecontroller["spec"]["parentResource"]
    group, version = parent["apiVersion"].split("/")
    assert crd["spec"]["group"] == group
    assert crd["spec"]["names"]["plural"] == parent["resource"]
    assert crd["metadata"]["name"] == f"{parent['resource']}.{group}"
    served = {v["name"] for v in crd["spec"]["versions"] if v.get("served")}
    assert version in served


def test_components_are_kustomize_components():
    components = MANIFESTS / "components"
    if not components.is_dir():
        pytest.skip("no components yet")
    for kdir in sorted(p for p in components.iterdir() if p.is_dir()):
        kust_file = kustomization_in(kdir)
        assert kust_file is not None, f"{kdir} has no kustomization.yaml"
        kust = load_one(kust_file)
        assert kust["kind"] == "Component", kdir
        assert kust["apiVersion"] == "kustomize.config.k8s.io/v1alpha1", kdir


# --------------------------------------------------------------------------- objects


def test_expected_objects_present(base_objects):
    kinds = {(o["kind"], o["metadata"]["name"]) for o in base_objects}
    assert kinds == {
        ("Namespace", NAMESPACE),
        ("CompositeController", "decicejob-controller"),
        ("ClusterRole", "decicejob-view"),
        ("ClusterRole", "decicejob-edit"),
        ("ServiceAccount", APP),
        ("Deployment", APP),
        ("Service", APP),
        ("PodDisruptionBudget", APP),
        ("NetworkPolicy", APP),
    }


def test_namespaces(base_objects):
    for obj in base_objects:
        ns = obj["metadata"].get("namespace")
        if obj["kind"] in CLUSTER_SCOPED_KINDS:
            assert ns is None, f"{obj['kind']}/{obj['metadata']['name']} is cluster-scoped"
        else:
            assert ns == NAMESPACE, f"{obj['kind']}/{obj['metadata']['name']}"


def test_hook_objects_carry_app_labels(base_objects, deployment):
    for obj in base_objects:
        if obj["metadata"]["name"] == APP:
            assert selector_matches(SELECTOR, obj["metadata"].get("labels", {})), obj["kind"]
    assert selector_matches(SELECTOR, deployment["spec"]["template"]["metadata"]["labels"])


def _builtin_object_ids() -> list[str]:
    try:
        objs = [d for path in listed_resource_files(BASE) for d in load_docs(path)]
        return [f"{o['kind']}/{o['metadata']['name']}" for o in objs if api_group(o) not in NON_BUILTIN_GROUPS]
    except Exception:  # reported by the other tests
        return []


@pytest.mark.parametrize("object_id", _builtin_object_ids())
def test_builtin_objects_validate_strict(get, object_id):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    obj = get(*object_id.split("/", 1))
    try:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        pytest.fail(f"{object_id}: {exc.message} at {list(exc.path)}")


def test_namespace_enforces_restricted_pod_security(get):
    labels = get("Namespace", NAMESPACE)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


# --------------------------------------------------------------------------- CompositeController


def test_composite_controller_parent_and_selector(compositecontroller):
    assert compositecontroller["apiVersion"] == "metacontroller.k8s.io/v1alpha1"
    spec = compositecontroller["spec"]
    assert spec["parentResource"] == {
        "apiVersion": "dev.decice.com/v1alpha1",
        "resource": "decicejobs",
    }
    assert spec["generateSelector"] is True


def test_composite_controller_children(compositecontroller):
    children = {
        (c["apiVersion"], c["resource"]): c.get("updateStrategy", {}).get("method")
        for c in compositecontroller["spec"]["childResources"]
    }
    assert children == {
        ("v1", "pods"): "OnDelete",
        ("v1", "persistentvolumeclaims"): "OnDelete",
        ("v1", "services"): "InPlace",
    }


def test_composite_controller_hooks(compositecontroller, get):
    hooks = compositecontroller["spec"]["hooks"]
    assert set(hooks) == {"sync", "finalize"}
    service = get("Service", APP)
    service_port = service["spec"]["ports"][0]["port"]
    for name, hook in hooks.items():
        assert hook["version"] == "v2"
        webhook = hook["webhook"]
        assert webhook["timeout"] == "10s"
        assert webhook.get("responseUnMarshallMode", "strict") == "strict"
        url = urlsplit(webhook["url"])
        assert url.scheme == "http"
        assert url.hostname == f"{service['metadata']['name']}.{service['metadata']['namespace']}"
        assert (url.port or 80) == service_port
        assert url.path == f"/{name}"


# --------------------------------------------------------------------------- hook workload


def test_deployment_basics(deployment, pod_spec, container):
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["selector"]["matchLabels"] == SELECTOR
    assert container["image"] == f"{IMAGE}:{IMAGE_TAG}"
    assert container["ports"] == [{"name": "http", "containerPort": HOOK_PORT, "protocol": "TCP"}]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["DECICE_HOOKS_BIND"] == f"0.0.0.0:{HOOK_PORT}"
    assert env["DECICE_HOOKS_WORKERS"] == "2"


def test_deployment_spreads_across_nodes(pod_spec):
    spread = pod_spec.get("topologySpreadConstraints") or []
    anti = (pod_spec.get("affinity") or {}).get("podAntiAffinity")
    by_host = [c for c in spread if c["topologyKey"] == "kubernetes.io/hostname"]
    assert by_host or anti
    for constraint in by_host:
        assert constraint["labelSelector"]["matchLabels"] == SELECTOR


def test_deployment_probes(container):
    probes = {
        "livenessProbe": "/healthz",
        "readinessProbe": "/readyz",
    }
    port_names = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe, path in probes.items():
        http_get = container[probe]["httpGet"]
        assert http_get["path"] == path
        port = http_get["port"]
        assert port_names.get(port, port) == HOOK_PORT


def test_deployment_resources(container):
    resources = container["resources"]
    assert {"cpu", "memory"} <= set(resources["requests"])
    assert "memory" in resources["limits"]


def test_deployment_security_context(pod_spec, container):
    pod_sc = pod_spec["securityContext"]
    ctr_sc = container["securityContext"]
    for sc in (pod_sc, ctr_sc):
        assert sc["runAsNonRoot"] is True
        assert sc["runAsUser"] == 10001
        assert sc["runAsGroup"] == 10001
        assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert ctr_sc["readOnlyRootFilesystem"] is True
    assert ctr_sc["allowPrivilegeEscalation"] is False
    assert ctr_sc["capabilities"] == {"drop": ["ALL"]}
    assert "privileged" not in ctr_sc


def test_deployment_tmp_is_writable_emptydir(pod_spec, container):
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert "/tmp" in mounts
    volumes = {v["name"]: v for v in pod_spec["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]


def test_service_account(get, pod_spec):
    sa = get("ServiceAccount", APP)
    assert sa["automountServiceAccountToken"] is False
    assert pod_spec["serviceAccountName"] == APP
    assert pod_spec["automountServiceAccountToken"] is False


def test_no_rbac_for_hooks(base_objects):
    for obj in base_objects:
        if obj["kind"] in ("Role", "RoleBinding", "ClusterRoleBinding"):
            pytest.fail(f"the hooks need no API access, found {obj['kind']}")


def test_service_targets_deployment(get, deployment, container):
    service = get("Service", APP)
    template_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selector_matches(service["spec"]["selector"], template_labels)
    (port,) = service["spec"]["ports"]
    assert port["port"] == 80
    assert port["targetPort"] == "http"
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert named[port["targetPort"]] == HOOK_PORT


def test_pod_disruption_budget(get, deployment):
    pdb = get("PodDisruptionBudget", APP)
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["minAvailable"] < deployment["spec"]["replicas"]
    template_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selector_matches(pdb["spec"]["selector"]["matchLabels"], template_labels)


def test_network_policy(get, deployment):
    policy = get("NetworkPolicy", APP)
    spec = policy["spec"]
    template_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selector_matches(spec["podSelector"]["matchLabels"], template_labels)
    assert spec["policyTypes"] == ["Ingress"]
    (rule,) = spec["ingress"]
    assert rule["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": METACONTROLLER_NAMESPACE}}}
    ]
    assert rule["ports"] == [{"protocol": "TCP", "port": HOOK_PORT}]


def test_aggregated_cluster_roles(get):
    view = get("ClusterRole", "decicejob-view")
    edit = get("ClusterRole", "decicejob-edit")
    agg = "rbac.authorization.k8s.io/aggregate-to-"
    view_labels = view["metadata"]["labels"]
    edit_labels = edit["metadata"]["labels"]
    assert all(view_labels.get(agg + r) == "true" for r in ("view", "edit", "admin"))
    assert all(edit_labels.get(agg + r) == "true" for r in ("edit", "admin"))
    assert agg + "view" not in edit_labels

    def verbs(role):
        out = set()
        for rule in role["rules"]:
            assert rule["apiGroups"] == ["dev.decice.com"]
            assert "decicejobs" in rule["resources"]
            out.update(rule["verbs"])
        return out

    assert verbs(view) == {"get", "list", "watch"}
    assert {"create", "update", "patch", "delete"} <= verbs(edit)
    assert "*" not in verbs(edit)


# --------------------------------------------------------------------------- kubectl kustomize

STUB_CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: decicejobs.dev.decice.com
spec:
  group: dev.decice.com
  names: {kind: DeciceJob, listKind: DeciceJobList, plural: decicejobs, singular: decicejob}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """A copy of manifests/ and crds/; the CRD is stubbed if it is not written yet."""
    root = tmp_path_factory.mktemp("tree")
    shutil.copytree(MANIFESTS, root / "manifests")
    shutil.copytree(CRDS, root / "crds")
    if not (root / "crds" / CRD_FILE.name).exists():
        (root / "crds" / CRD_FILE.name).write_text(STUB_CRD, encoding="utf-8")
    return root


def kustomize(directory: Path) -> list[dict]:
    proc = subprocess.run(
        [KUBECTL, "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d is not None]


def find(objs: list[dict], kind: str, name: str) -> dict:
    matches = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} matches"
    return matches[0]


EXPECTED_KINDS = {
    "Namespace",
    "CustomResourceDefinition",
    "CompositeController",
    "ClusterRole",
    "ServiceAccount",
    "Deployment",
    "Service",
    "PodDisruptionBudget",
    "NetworkPolicy",
}


@needs_kubectl
def test_kustomize_root_renders_everything(tree):
    objs = kustomize(tree / "manifests")
    assert EXPECTED_KINDS <= {o["kind"] for o in objs}
    find(objs, "CustomResourceDefinition", "decicejobs.dev.decice.com")
    find(objs, "CompositeController", "decicejob-controller")
    for obj in objs:
        labels = obj["metadata"].get("labels", {})
        assert selector_matches(COMMON_LABELS, labels), f"{obj['kind']}/{obj['metadata']['name']}"
        if obj["kind"] in CLUSTER_SCOPED_KINDS:
            assert "namespace" not in obj["metadata"]
    template = find(objs, "Deployment", APP)["spec"]["template"]["metadata"]["labels"]
    assert selector_matches(COMMON_LABELS, template)
    assert find(objs, "Deployment", APP)["spec"]["selector"]["matchLabels"] == SELECTOR


@needs_kubectl
@pytest.mark.parametrize("kdir", kustomization_dirs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_kustomize_every_directory_renders(tree, kdir):
    target = tree / kdir.relative_to(ROOT)
    kust = load_one(kustomization_in(target))
    if kust.get("kind") == "Component":
        # A Component only renders on top of something: apply it to base.
        overlay = tree / "component-check" / target.name
        overlay.mkdir(parents=True)
        (overlay / "kustomization.yaml").write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kustomize.config.k8s.io/v1beta1",
                    "kind": "Kustomization",
                    # kustomize rejects absolute paths.
                    "resources": [os.path.relpath(tree / "manifests" / "base", overlay)],
                    "components": [os.path.relpath(target, overlay)],
                }
            ),
            encoding="utf-8",
        )
        target = overlay
    objs = kustomize(target)
    assert objs
    controllers = [o for o in objs if o["kind"] == "CompositeController"]
    if kust.get("kind") == "Component" or "overlays" in kdir.relative_to(MANIFESTS).parts:
        assert controllers, "overlays and components must build on base"
    for cc in controllers:
        # Overlays and components may add children but must keep the base ones.
        resources = [(c["apiVersion"], c["resource"]) for c in cc["spec"]["childResources"]]
        assert {("v1", "pods"), ("v1", "persistentvolumeclaims"), ("v1", "services")} <= set(resources)
        assert len(resources) == len(set(resources)), "duplicate child resource"


# --------------------------------------------------------------------------- Dockerfile


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs with line continuations joined."""
    instructions = []
    pending = ""
    for raw in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # comment lines inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        keyword, _, args = line.partition(" ")
        instructions.append((keyword.upper(), args.strip()))
    assert not pending, "Dockerfile ends with a line continuation"
    return instructions


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for keyword, args in dockerfile_instructions():
        if keyword == "FROM":
            stages.append([])
        elif not stages:
            assert keyword == "ARG", f"{keyword} before the first FROM"
            continue
        stages[-1].append((keyword, args))
    assert stages, "Dockerfile has no FROM"
    return stages


def from_image(stage) -> tuple[str, str | None]:
    keyword, args = stage[0]
    words = [w for w in args.split() if not w.startswith("--")]
    alias = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
    return words[0], alias


def env_of(stage) -> dict[str, str]:
    env = {}
    for keyword, args in stage:
        if keyword == "ENV":
            for word in shlex.split(args):
                key, _, value = word.partition("=")
                env[key] = value
    return env


@pytest.fixture(scope="module")
def stages():
    return dockerfile_stages()


@pytest.fixture(scope="module")
def final_stage(stages):
    return stages[-1]


def test_dockerfile_is_multi_stage_on_slim(stages, final_stage):
    assert len(stages) >= 2
    builder_image, builder_alias = from_image(stages[0])
    final_image, _ = from_image(final_stage)
    assert builder_alias
    assert builder_image == "python:3.11-slim"
    assert final_image == "python:3.11-slim"
    assert "slim" in final_image
    # The final stage takes the wheels from the builder.
    assert any(f"from={builder_alias}" in args for kw, args in final_stage if kw in ("COPY", "RUN"))


def test_dockerfile_builds_wheels_of_the_project(stages):
    runs = [args for kw, args in stages[0] if kw == "RUN"]
    assert any(re.search(r"\bpip wheel\b.*\s\.(\s|$)", run) for run in runs)


def test_dockerfile_final_stage_installs_only_wheels(final_stage):
    env = env_of(final_stage)
    installs = [args for kw, args in final_stage if kw == "RUN" and "pip install" in args]
    assert installs
    for run in installs:
        assert "--no-index" in run
        assert "--no-cache-dir" in run or env.get("PIP_NO_CACHE_DIR") in ("1", "true", "on")


def test_dockerfile_final_stage_has_no_build_tools(final_stage):
    forbidden = re.compile(r"(^|[\s=])(gcc|g\+\+|cc|clang|make|build-essential|[\w.+-]+-dev)(\s|$)")
    for keyword, args in final_stage:
        if keyword == "RUN":
            assert not forbidden.search(args), args
            assert "apt-get install" not in args and "apk add" not in args, args


def test_dockerfile_runs_as_non_root(final_stage):
    users = [args for kw, args in final_stage if kw == "USER"]
    assert users, "final stage sets no USER"
    user, _, group = users[-1].partition(":")
    assert user not in ("root", "0")
    assert user == "10001"
    assert group in ("", "10001")


def test_dockerfile_env_expose_healthcheck_entrypoint(final_stage):
    env = env_of(final_stage)
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["PYTHONUNBUFFERED"] == "1"
    assert env["DECICE_HOOKS_BIND"].rsplit(":", 1)[1] == str(HOOK_PORT)

    exposed = [args for kw, args in final_stage if kw == "EXPOSE"]
    assert exposed and str(HOOK_PORT) in exposed[-1].replace("/tcp", "").split()

    healthchecks = [args for kw, args in final_stage if kw == "HEALTHCHECK"]
    assert len(healthchecks) == 1
    check = healthchecks[0]
    # The server's own check follows the bind address and TLS settings (no curl or wget in the image).
    assert json.loads(check.partition("CMD")[2]) == ["decice-hooks", "--healthcheck"]

    entrypoints = [args for kw, args in final_stage if kw == "ENTRYPOINT"]
    assert len(entrypoints) == 1
    assert json.loads(entrypoints[0]) == ["decice-hooks"]


def test_dockerignore():
    patterns = {
        line.strip()
        for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".git", ".venv"} <= patterns
    assert any("__pycache__" in p for p in patterns)
    assert any("pytest_cache" in p for p in patterns)
    # Needed to build the wheel.
    for needed in ("pyproject.toml", "README.md", "hooks", "glue"):
        assert needed not in patterns and f"/{needed}" not in patterns


# --------------------------------------------------------------------------- docs


def test_install_doc_matches_files():
    text = INSTALL_DOC.read_text(encoding="utf-8")
    assert "kubectl apply -k manifests/" in text
    assert "v4.17.2" in text
    assert f"{IMAGE}" in text and "images:" in text
    assert "kubernetes.io/metadata.name" in text
    for rel in re.findall(r"(?<![\w/.-])(manifests/[\w./-]+)", text):
        rel = rel.rstrip(".")
        if "<" in rel or "components/" in rel:
            continue
        assert (ROOT / rel).exists(), f"docs/install.md mentions missing {rel}"
