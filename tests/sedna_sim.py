"""Sedna's GlobalManager as a DeciceJob sees it: writes a Sedna resource's status the way Sedna's
controllers do (and its LocalControllers' reports, for the learning kinds).

Sedna appends conditions (all with status True; the newest is the current state) and stamps
them with the cluster clock.  Condition fields follow each kind's CRD: a FederatedLearningJob's
conditions carry ``lastProbeTime`` and no ``lastTransitionTime``; the learning kinds' carry a
``stage``.
"""

from __future__ import annotations

from hooks.model import SEDNA_KINDS
from tests.driver import Cluster


class SednaControllers:
    def __init__(self, cluster: Cluster):
        self.cluster = cluster

    def resource(self, job: dict) -> dict:
        """The job's one Sedna resource (fails when there is none)."""
        found = [o for o in self.cluster.children_of(job) if o["kind"] in SEDNA_KINDS]
        assert len(found) == 1, [o["metadata"]["name"] for o in found]
        return found[0]

    def _append(self, obj: dict, kind: str, reason: str = "", message: str = "", **extra: str) -> dict:
        now = self.cluster.clock.stamp()
        condition = {"type": kind, "status": "True", "lastHeartbeatTime": now}
        condition["lastProbeTime" if obj["kind"] == "FederatedLearningJob" else "lastTransitionTime"] = now
        if reason:
            condition["reason"] = reason
        if message:
            condition["message"] = message
        condition.update(extra)
        status = obj.setdefault("status", {})
        status.setdefault("startTime", now)
        status.setdefault("conditions", []).append(condition)
        return obj

    # JointInferenceService: Deployments for the edge and cloud workers.

    def serve(self, obj: dict) -> dict:
        """Both worker Deployments are created and progressing."""
        self._append(obj, "Running")
        obj["status"].update(active=2, failed=0)
        return obj

    def lose_worker(self, obj: dict) -> dict:
        """A worker Deployment stopped progressing: Sedna marks the service Failed for good."""
        self._append(obj, "Failed", "workerFailed", "the worker of service failed")
        obj["status"].update(active=1, failed=1)
        return obj

    # FederatedLearningJob: one pod per worker.

    def _workers(self, obj: dict) -> int:
        return 1 + len(obj["spec"]["trainingWorkers"])

    def start_training(self, obj: dict) -> dict:
        status = obj.setdefault("status", {})
        status.setdefault("startTime", self.cluster.clock.stamp())
        status.update(phase="Running", active=self._workers(obj), succeeded=0, failed=0)
        return obj

    def round(self, obj: dict, number: int) -> dict:
        """The aggregation worker reports a finished round through the LocalController."""
        return self._append(obj, "Training", "DoTraining",
                            f"Round {number} reaches at {self.cluster.clock.stamp()}")

    def complete(self, obj: dict) -> dict:
        self._append(obj, "Complete")
        obj["status"].update(phase="Succeeded", active=0, succeeded=self._workers(obj),
                             completionTime=self.cluster.clock.stamp())
        return obj

    def fail_training(self, obj: dict) -> dict:
        self._append(obj, "Failed", "workerFailed", "the worker of FederatedLearningJob failed")
        obj["status"].update(phase="Failed", active=self._workers(obj) - 1, failed=1)
        return obj

    # IncrementalLearningJob / LifelongLearningJob: a train → eval → deploy loop.

    def take(self, obj: dict) -> dict:
        """Sedna takes the job: the loop waits for the train trigger."""
        return self.stage(obj, "Train", "Waiting")

    def stage(self, obj: dict, stage: str, kind: str, node: str | None = None) -> dict:
        """A stage condition (Waiting/Ready from the LocalController, Starting/Running/Completed/
        Failed from the GlobalManager watching the stage's pod); ``node``: where that pod runs."""
        self._append(obj, kind, stage=stage, message="reported by lc" if kind in ("Ready", "Waiting") else "")
        if node is not None:
            obj["metadata"].setdefault("annotations", {})[f"sedna.io/{stage}"] = node
        return obj
