"""Tests of the validation helpers in tests/schemas.py."""

from __future__ import annotations

import copy
from fractions import Fraction

import pytest

from tests.schemas import CelError, CRDValidator, builtin_errors, parse_quantity, reference_crd_path


def crd(spec_schema: dict, **root: object) -> dict:
    """A namespaced CRD ``example.com/v1 Widget`` whose ``spec`` has the given schema."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Widget", "plural": "widgets"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec_schema,
                            },
                            **root,
                        }
                    },
                }
            ],
        },
    }


def widget(spec: dict, name: str = "w") -> dict:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


def spec_validator(properties: dict, **spec: object) -> CRDValidator:
    return CRDValidator(crd({"type": "object", "properties": properties, **spec}))


def rules_validator(*rules: dict, **properties: dict) -> CRDValidator:
    """A validator whose ``spec`` carries the given x-kubernetes-validations."""
    return spec_validator(properties, **{"x-kubernetes-validations": list(rules)})


ITEMS = {"type": "array", "maxItems": 10, "items": {"type": "integer"}}


# --- defaults ---------------------------------------------------------------------------


def test_defaults_are_applied_recursively_where_the_parent_exists() -> None:
    validator = spec_validator({
        "mode": {"type": "string", "default": "fast"},
        "limits": {"type": "object", "properties": {"cpu": {"type": "string", "default": "1"}}},
        "ports": {"type": "array", "items": {"type": "object", "properties": {
            "port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"}}}},
        "labels": {"type": "object", "additionalProperties": {
            "type": "object", "properties": {"weight": {"type": "integer", "default": 1}}}},
        "policy": {"type": "object", "default": {}, "properties": {"retries": {"type": "integer", "default": 3}}},
    })
    obj = widget({"ports": [{"port": 80}], "labels": {"a": {}}})
    assert validator.defaulted(obj)["spec"] == {
        "mode": "fast",
        "ports": [{"port": 80, "protocol": "TCP"}],
        "labels": {"a": {"weight": 1}},
        "policy": {"retries": 3},
    }
    assert "limits" not in validator.defaulted(obj)["spec"]
    assert obj["spec"] == {"ports": [{"port": 80}], "labels": {"a": {}}}, "the input is not modified"
    assert validator.errors(obj) == []


def test_null_is_defaulted_unless_nullable() -> None:
    validator = spec_validator({
        "a": {"type": "string", "default": "x"},
        "b": {"type": "string", "default": "x", "nullable": True},
    })
    assert validator.defaulted(widget({"a": None, "b": None}))["spec"] == {"a": "x", "b": None}


# --- OpenAPI validation -------------------------------------------------------------------


def test_enum_bounds_pattern_and_formats_are_reported() -> None:
    validator = spec_validator({
        "mode": {"type": "string", "enum": ["fast", "slow"]},
        "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "format": "int32"},
        "ratio": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
        "name": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"},
        "tags": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}},
        "labels": {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "string"}},
        "big": {"type": "integer", "format": "int32"},
        "when": {"type": "string", "format": "date-time"},
    })
    assert validator.errors(widget({"mode": "fast", "replicas": 3, "ratio": 0.5, "name": "abc", "tags": ["x"],
                                    "labels": {"a": "b"}, "big": 2**31 - 1, "when": "2024-01-02T03:04:05Z"})) == []
    errors = validator.errors(widget({"mode": "medium", "replicas": 11, "ratio": 0, "name": "A", "tags": [],
                                      "labels": {"a": "b", "c": "d"}, "big": 2**31, "when": "yesterday"}))
    assert [e.split(":")[0] for e in errors] == [
        "spec.big", "spec.labels", "spec.mode", "spec.name", "spec.name", "spec.ratio",
        "spec.replicas", "spec.tags", "spec.when",
    ]
    assert "spec.mode: 'medium' is not one of ['fast', 'slow']" in errors
    assert "spec.ratio: 0 is less than or equal to the minimum of 0" in errors


def test_types_unknown_fields_and_nulls_are_reported() -> None:
    validator = spec_validator({
        "replicas": {"type": "integer"},
        "port": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "note": {"type": "string", "nullable": True},
        "text": {"type": "string"},
    })
    assert validator.errors(widget({"replicas": 1, "port": "http", "extra": {"any": [1]}, "note": None})) == []
    assert validator.errors(widget({"port": 8080})) == []
    assert validator.errors(widget({"replicas": "1", "port": 1.5, "bogus": 1, "text": None})) == [
        "spec.bogus: unknown field",
        "spec.port: 1.5 is not of type 'integer', 'string'",
        "spec.replicas: '1' is not of type 'integer'",
        "spec.text: None is not of type 'string'",
    ]
    assert validator.errors(widget({"replicas": 1.0})) == ["spec.replicas: 1.0 is not of type 'integer'"]


def test_root_identity_and_metadata_are_checked() -> None:
    validator = spec_validator({})
    obj = widget({}, name="Not_A_Name")
    obj.update(apiVersion="example.com/v2", kind="Gadget")
    obj["metadata"]["labels"] = {"a": 1}
    obj["metadata"]["colour"] = "red"
    assert validator.errors(obj) == [
        "apiVersion: 'example.com/v1' was expected",
        "kind: 'Widget' was expected",
        "metadata.colour: unknown field",
        "metadata.labels.a: 1 is not of type 'string', 'null'",
        "metadata.name: 'Not_A_Name' does not match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'",
    ]
    del obj["metadata"]["name"]
    assert "metadata.name: name or generateName is required" in validator.errors(obj)


def test_list_map_duplicate_keys_and_set_duplicates_are_reported() -> None:
    validator = spec_validator({
        "ports": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["port", "protocol"],
            "items": {"type": "object", "required": ["port"], "properties": {
                "port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"}}},
        },
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
    })
    ok = {"ports": [{"port": 80}, {"port": 80, "protocol": "UDP"}], "tags": ["a", "b"]}
    assert validator.errors(widget(ok)) == []
    bad = {"ports": [{"port": 80}, {"port": 81}, {"port": 80, "protocol": "TCP"}], "tags": ["a", "b", "a"]}
    assert validator.errors(widget(bad)) == [
        'spec.ports[2]: Duplicate value: {"port": 80, "protocol": "TCP"}',
        'spec.tags[2]: Duplicate value: "a"',
    ]


def test_embedded_resources_need_apiversion_and_kind() -> None:
    validator = spec_validator({"template": {
        "type": "object", "x-kubernetes-embedded-resource": True, "x-kubernetes-preserve-unknown-fields": True}})
    assert validator.errors(widget({"template": {"apiVersion": "v1", "kind": "Pod", "spec": {"x": 1}}})) == []
    assert validator.errors(widget({"template": {"metadata": {"name": 5}}})) == [
        "spec.template.metadata.name: 5 is not of type 'string', 'null'",
        "spec.template: 'apiVersion' is a required property",
        "spec.template: 'kind' is a required property",
    ]


# --- CEL rules ----------------------------------------------------------------------------


def test_cel_rule_true_and_false() -> None:
    validator = rules_validator(
        {"rule": "self.min <= self.max", "message": "min must not exceed max"},
        {"rule": "self.max < 100"},
        min={"type": "integer"}, max={"type": "integer"},
    )
    assert validator.errors(widget({"min": 1, "max": 2})) == []
    assert validator.errors(widget({"min": 300, "max": 200})) == [
        "spec: failed rule: self.max < 100",
        "spec: min must not exceed max",
    ]


def test_cel_rules_run_on_every_node_with_field_path() -> None:
    items = {"type": "object", "properties": {"name": {"type": "string"}}, "x-kubernetes-validations": [
        {"rule": "self.name != 'x'", "message": "no x", "fieldPath": ".name"}]}
    validator = CRDValidator(crd(
        {"type": "object", "properties": {
            "tasks": {"type": "array", "items": items},
            "byName": {"type": "object", "additionalProperties": items}}},
        **{"x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('w')", "message": "root rule"}]},
    ))
    assert validator.errors(widget({"tasks": [{"name": "a"}, {"name": "x"}], "byName": {"k": {"name": "x"}}},
                                   name="v")) == [
        "<root>: root rule",
        "spec.byName.k.name: no x",
        "spec.tasks[1].name: no x",
    ]


def test_cel_message_expression() -> None:
    validator = rules_validator(
        {"rule": "self.replicas <= 3", "messageExpression": "'replicas is ' + string(self.replicas) + ', max 3'"},
        {"rule": "self.replicas <= 4", "message": "static", "messageExpression": "''"},
        {"rule": "self.replicas <= 5", "message": "static", "messageExpression": "self.nope"},
        replicas={"type": "integer"},
    )
    assert validator.errors(widget({"replicas": 9})) == [
        "spec: replicas is 9, max 3",
        "spec: static",
        "spec: static (messageExpression: evaluation error: NOT_FOUND: Key not found in map : \"nope\")",
    ]


def test_cel_compile_and_evaluation_errors_surface() -> None:
    validator = rules_validator(
        {"rule": "self.replicas >"},
        {"rule": "self.nope > 1"},
        {"rule": "self.replicas"},
        replicas={"type": "integer"},
    )
    errors = validator.errors(widget({"replicas": 1}))
    assert len(errors) == 3
    assert errors[0].startswith("spec: rule 'self.nope > 1': evaluation error")
    assert errors[1].startswith("spec: rule 'self.replicas >': compile error")
    assert errors[2] == "spec: rule 'self.replicas' returned 1, not a bool"
    assert any("does not compile" in p for p in validator.structural_problems())


def test_cel_rules_are_skipped_after_blocking_errors() -> None:
    validator = rules_validator({"rule": "self.replicas > 0"}, replicas={"type": "integer"})
    assert validator.errors(widget({"replicas": "many"})) == [
        "<root>: some validation rules were not checked because the object was invalid",
        "spec.replicas: 'many' is not of type 'integer'",
    ]


def test_cel_transition_rules_only_with_optional_old_self() -> None:
    validator = rules_validator(
        {"rule": "self.replicas == oldSelf.replicas", "message": "immutable"},
        {"rule": "!oldSelf.hasValue() && self.replicas > 5", "optionalOldSelf": True, "message": "on create"},
        replicas={"type": "integer"},
    )
    assert validator.errors(widget({"replicas": 1})) == ["spec: on create"]
    assert validator.errors(widget({"replicas": 6})) == []


def test_cel_sees_escaped_names_doubles_and_only_declared_fields() -> None:
    validator = rules_validator(
        {"rule": "self.x__dash__y == 1 && self.__namespace__ == 'n' && self.ratio * 0.5 == 1.0"},
        {"rule": "!has(self.extra.hidden) && self.labels['a-b'] == 'c'"},
        **{"x-y": {"type": "integer"}, "namespace": {"type": "string"}, "ratio": {"type": "number"},
           "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
           "labels": {"type": "object", "additionalProperties": {"type": "string"}}},
    )
    obj = widget({"x-y": 1, "namespace": "n", "ratio": 2, "extra": {"hidden": 1}, "labels": {"a-b": "c"}})
    assert validator.errors(obj) == []


def test_kubernetes_list_and_string_libraries() -> None:
    validator = rules_validator(
        {"rule": "self.items.sum() == 6 && self.items.min() == 1 && self.items.max() == 3"},
        {"rule": "self.items.isSorted() && self.items.indexOf(2) == 1 && [1, 2, 1].lastIndexOf(1) == 2"},
        {"rule": "self.name.find('[0-9]+') == '42' && self.name.findAll('[a-z]') == ['a', 'b']"},
        {"rule": "'a1b2'.findAll('[0-9]', 1) == ['1'] && self.name.lowerAscii() == 'a42b'"},
        {"rule": "sets.contains([1, 2, 3], [2]) && sets.intersects([1], [1, 4]) && sets.equivalent([1, 2], [2, 1])"},
        {"rule": "self.name.split('4')[0] == 'a' && self.?missing.orValue('d') == 'd'"},
        {"rule": "self.items.sum() < 5", "messageExpression": "'sum is ' + string(self.items.sum())"},
        items=ITEMS, name={"type": "string", "maxLength": 10},
    )
    assert validator.errors(widget({"items": [1, 2, 3], "name": "a42b"})) == ["spec: sum is 6"]
    with pytest.raises(CelError, match="min called on empty list"):
        validator.evaluate("self.min()", [])


def test_kubernetes_quantity_library() -> None:
    validator = rules_validator(
        {"rule": "isQuantity(self.memory) && !isQuantity('1.5x') && !isQuantity('')"},
        {"rule": "quantity(self.memory).isGreaterThan(quantity('1G'))"},
        {"rule": "quantity('200M').compareTo(quantity('0.2G')) == 0 && quantity('50M').isLessThan(quantity('50Mi'))"},
        {"rule": "quantity('50k').add(20).sub(quantity('100k')).sub(-50000).asInteger() == 20"},
        {"rule": "quantity('1.5').asApproximateFloat() == 1.5 && !quantity('1.5').isInteger()"},
        {"rule": "quantity('-1m').sign() == -1 && quantity('2Ki') == quantity('2048')"},
        {"rule": "quantity(self.memory).isLessThan(quantity('1Gi'))", "message": "at most 1Gi"},
        memory={"type": "string", "maxLength": 20},
    )
    assert validator.errors(widget({"memory": "1Gi"})) == ["spec: at most 1Gi"]
    assert validator.errors(widget({"memory": "1000M"})) == ["spec: failed rule: quantity(self.memory).isGreaterThan(quantity('1G'))"]


@pytest.mark.parametrize(("text", "value"), [
    ("1", 1), ("1.5Gi", Fraction(3 * 2**29)), ("200m", Fraction(1, 5)), ("1e3", 1000), ("-2E-3", Fraction(-1, 500)),
    ("1E", 10**18), (".5k", 500), ("1n", Fraction(1, 10**9)), ("0.1n", Fraction(1, 10**9)), ("+3u", Fraction(3, 10**6)),
])
def test_parse_quantity(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "1.5x", "1 Gi", "Gi", "1e", "1ki", "--1"])
def test_parse_quantity_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_quantity(text)


# --- structural schema checks -----------------------------------------------------------------


def test_structural_problems_of_a_broken_schema() -> None:
    broken = crd({
        "type": "object",
        "properties": {
            "untyped": {"description": "no type"},
            "both": {"type": "object", "properties": {"a": {"type": "string"}},
                     "additionalProperties": {"type": "string"}},
            "keys": {"type": "array", "x-kubernetes-list-map-keys": ["name"], "items": {"type": "object"}},
            "mapped": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                       "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
            "bad-default": {"type": "integer", "default": "three"},
            "names": {"type": "array", "items": {"type": "string"},
                      "x-kubernetes-validations": [{"rule": "self.all(n, n.size() < 5)"}]},
            "junctor": {"type": "string", "maxLength": 5, "anyOf": [{"type": "string", "nullable": True}]},
            "count": {"type": "integer"},
            "unique": {"type": "array", "uniqueItems": True, "items": {"type": "integer"}},
        },
        "x-kubernetes-validations": [{"rule": "self.names.size() > 0"}, {"rule": "self.count > 0 && self.junctor != ''"}],
    }, **{"x-kubernetes-validations": [{"rule": "self.spec.mapped.size() >= 0"}]})
    broken["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["metadata"] = {
        "type": "object", "properties": {"labels": {"type": "object"}}}
    problems = CRDValidator(broken).structural_problems()
    expected = [
        "openAPIV3Schema.properties[metadata]:",
        "openAPIV3Schema.properties[spec].properties[untyped].type: must not be empty",
        "openAPIV3Schema.properties[spec].properties[both]: properties and additionalProperties",
        "openAPIV3Schema.properties[spec].properties[keys].x-kubernetes-list-map-keys: only allowed",
        "openAPIV3Schema.properties[spec].properties[mapped].items.properties[name]: a list map key must be required",
        "openAPIV3Schema.properties[spec].properties[bad-default].default: <root>: 'three' is not of type 'integer'",
        "openAPIV3Schema.properties[spec].properties[names].x-kubernetes-validations[0]: rule 'self.all(n, n.size() < 5)' sits on a node without maxItems",
        "openAPIV3Schema.properties[spec].properties[names].x-kubernetes-validations[0]: rule 'self.all(n, n.size() < 5)' uses openAPIV3Schema.properties[spec].properties[names].items, which has no maxLength",
        "openAPIV3Schema.properties[spec].x-kubernetes-validations[0]: rule 'self.names.size() > 0' uses openAPIV3Schema.properties[spec].properties[names], which has no maxItems",
        "openAPIV3Schema.properties[spec].x-kubernetes-validations[0]: rule 'self.names.size() > 0' uses openAPIV3Schema.properties[spec].properties[names].items, which has no maxLength",
        "openAPIV3Schema.x-kubernetes-validations[0]: rule 'self.spec.mapped.size() >= 0' uses openAPIV3Schema.properties[spec].properties[mapped]",
        "openAPIV3Schema.properties[spec].properties[junctor].anyOf[0].nullable: must not be set",
        "openAPIV3Schema.properties[spec].properties[junctor].anyOf[0].type: must not be set",
        "openAPIV3Schema.properties[spec].properties[unique].uniqueItems: must not be true",
    ]
    for start in expected:
        assert any(p.startswith(start) for p in problems), (start, problems)
    assert len(problems) == len(expected), "the rule on count and the bounded junctor is fine"


def test_structural_problems_of_a_clean_schema() -> None:
    definition = crd(
        {"type": "object", "properties": {
            "names": {"type": "array", "maxItems": 4, "items": {"type": "string", "maxLength": 10}},
            "port": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
        }, "x-kubernetes-validations": [
            {"rule": "self.names.all(n, n.size() < 5)"},
            {"rule": "self.mode == oldSelf.mode", "message": "immutable"},
            {"rule": "!oldSelf.hasValue() || self.names.size() >= oldSelf.value().names.size()",
             "optionalOldSelf": True},
        ]},
        **{"x-kubernetes-validations": [{"rule": "self.metadata.name.size() < 20"}]},
    )
    schema = definition["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"]["metadata"] = {"type": "object", "properties": {"name": {"type": "string"}}}
    assert CRDValidator(definition).structural_problems() == []


# --- built-in objects ----------------------------------------------------------------------------


POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "labels": {"app": "x"}},
    "spec": {
        "restartPolicy": "Never",
        "containers": [{
            "name": "main", "image": "busybox:1.36", "command": ["sh", "-c", "true"],
            "ports": [{"containerPort": 8080, "protocol": "TCP"}],
            "resources": {"limits": {"cpu": "500m", "memory": 1048576}},
            "env": [{"name": "A", "value": "1"}],
        }],
    },
}
PVC = {
    "apiVersion": "v1",
    "kind": "PersistentVolumeClaim",
    "metadata": {"name": "data"},
    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
}
SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "svc"},
    "spec": {"clusterIP": "None", "selector": {"app": "x"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]},
}


@pytest.mark.parametrize("obj", [POD, PVC, SERVICE], ids=lambda o: o["kind"])
def test_builtin_valid_objects(obj: dict) -> None:
    assert builtin_errors(obj) == []


def test_builtin_unknown_field_and_wrong_type() -> None:
    pod = copy.deepcopy(POD)
    pod["spec"]["containers"][0]["imagePullPolicy"] = 1
    pod["spec"]["containers"][0]["ports"][0]["containerPort"] = "8080"
    pod["spec"]["restartPolcy"] = "Never"
    pod["spec"]["containers"].append({"name": "main", "image": "x"})
    assert builtin_errors(pod) == [
        "spec.containers[0].imagePullPolicy: 1 is not of type 'string', 'null'",
        "spec.containers[0].ports[0].containerPort: '8080' is not of type 'integer'",
        'spec.containers[1]: Duplicate value: {"name": "main"}',
        "spec.restartPolcy: unknown field",
    ]


def test_builtin_other_kinds_and_unknown_kind() -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"app": "x"}}, "template": {"metadata": {"labels": {"app": "x"}}, "spec": POD["spec"]}}}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}
    assert builtin_errors(deployment) == []
    assert builtin_errors(role) == []
    assert builtin_errors({**role, "rules": [{"verbs": "get"}]}) == ["rules[0].verbs: 'get' is not of type 'array'"]
    with pytest.raises(LookupError, match="Widget"):
        builtin_errors(widget({}))
    with pytest.raises(ValueError, match="no kubernetes-validate schemas"):
        builtin_errors(POD, version="0.1")


# --- reference CRDs ------------------------------------------------------------------------------


def test_reference_crd_path_skips_when_the_file_is_absent() -> None:
    with pytest.raises(pytest.skip.Exception, match="reference CRD not available"):
        reference_crd_path("volcano", "no-such-crd.yaml")


def test_volcano_job_reference_crd() -> None:
    validator = CRDValidator.from_file(reference_crd_path("volcano", "batch.volcano.sh_jobs.yaml"))
    assert CRDValidator.from_file(reference_crd_path("volcano", "batch.volcano.sh_jobs.yaml")) is validator
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "demo-vc", "namespace": "team-a"},
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": 2,
            "tasks": [{
                "name": "worker",
                "replicas": 2,
                "template": {"metadata": {"labels": {"app": "demo"}}, "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox:1.36",
                                    "ports": [{"containerPort": 80}],
                                    "resources": {"requests": {"cpu": 1, "memory": "1Gi"}}}]}},
            }],
        },
    }
    assert validator.errors(job) == []
    assert validator.defaulted(job)["spec"]["queue"] == "default"
    bad = copy.deepcopy(job)
    bad["spec"]["tasks"][0]["replicas"] = "two"
    bad["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["imagePullPolicy"] = 3
    bad["spec"]["tasks"][0]["template"]["spec"]["containers"].append({"name": "main", "image": "x"})
    bad["spec"]["policies"] = [{"event": "PodExploded", "action": "RestartJob"}]
    bad["spec"]["unknownKnob"] = True
    assert validator.errors(bad) == [
        "spec.policies[0].event: 'PodExploded' is not one of ['*', 'PodPending', 'PodRunning', 'PodFailed', "
        "'PodEvicted', 'Unknown', 'TaskCompleted', 'OutOfSync', 'CommandIssued', 'JobUpdated', 'TaskFailed']",
        "spec.tasks[0].replicas: 'two' is not of type 'integer'",
        "spec.tasks[0].template.spec.containers[0].imagePullPolicy: 3 is not of type 'string'",
        'spec.tasks[0].template.spec.containers[1]: Duplicate value: {"name": "main"}',
        "spec.unknownKnob: unknown field",
    ]
    assert validator.structural_problems() == []
