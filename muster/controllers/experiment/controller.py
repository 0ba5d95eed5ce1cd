"""The Experiment controller: trials chosen by the sampler, run as TrainingJobs through the
queues, their metrics read, the poor ones stopped early, the best one reported.

One reconcile of an experiment, level-triggered (everything is derived from the Experiment,
its Trials, their jobs and pods, and the stored metrics, so a pass interrupted anywhere is
completed by the next):

1. first sight: the sampler's seed is stored (``status.suggestion``), Created, Running;
2. every trial is observed (:mod:`.observe`): the metrics its primary container and metrics
   file gained, its phase following its job, the ASHA rungs it reached or the median rule,
   the GPU-seconds its pods held;
3. the experiment concludes when the goal is reached, too many trials failed, maxTrialCount
   trials ended or the grid is exhausted (Katib's order); the trials still waiting or
   running are killed (their jobs suspended: the checkpoint handshake, GPUs back);
4. otherwise free slots (``parallelTrialCount``) go first to a paused trial that is now in
   the top 1/eta of its ASHA rung (promoted: its job resumes from its checkpoint), then to
   new trials: each Trial object, with the sampler's values, is stored before its job;
5. the trials' statuses are written, then their jobs are created, suspended or resumed,
   then the experiment's status (counts, the best trial, GPU-seconds).

Metrics are looked at again every ``poll_seconds`` while trials run, and the files of running
trials every ``look_seconds`` between passes (:mod:`.watch`: one stat each; an experiment is
reconciled at once when a trial's report reaches a rung or the median rule applies). A trial's
points are stored (TrialMetrics segments) at most every ``save_seconds``, and when it ends or a
rule decides about it.
"""

from __future__ import annotations

import copy
import logging
import random
import shutil
from dataclasses import dataclass, field
from typing import Any

from muster.api.conditions import iso
from muster.api.errors import InvalidObject
from muster.api.experiment_plan import PlanErrors, SearchPlan, plan_search
from muster.api.labels import EXPERIMENT_LABEL, JOB_NAME_LABEL
from muster.api.lifecycle import EventSpec
from muster.controllers.context import Context
from muster.controllers.experiment.collect import TrialRecord, metrics_dir
from muster.controllers.experiment.lifecycle import (
    ACTIVE,
    ExperimentPhase,
    TrialPhase,
    experiment_phase,
    move_experiment,
)
from muster.controllers.experiment.metrics import LineParser
from muster.controllers.experiment.observe import (
    TrialWork,
    account_gpus,
    collect,
    decide,
    follow_job,
    gpu_seconds,
    metrics_source,
    rung_entries,
)
from muster.controllers.experiment.results import best_trial, conclusion, counts, objective_value
from muster.controllers.experiment.search import Slots, fill_slots
from muster.controllers.experiment.stopping import next_milestone
from muster.controllers.experiment.suggest import TpeMemory
from muster.controllers.experiment.trials import trial_job
from muster.controllers.experiment.watch import MetricsWatch, Source, watch_key
from muster.runtime.base import SupportsLogs
from muster.store.base import NotFound

__all__ = ["ExperimentController"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]


class ExperimentController:
    def __init__(
        self,
        ctx: Context,
        logs: SupportsLogs | None = None,
        poll_seconds: float = 0.5,
        save_seconds: float = 2.0,
        look_seconds: float = 0.05,
    ) -> None:
        self.ctx = ctx
        self.logs = logs
        self.poll_seconds = poll_seconds
        self.save_seconds = save_seconds
        self.look_seconds = look_seconds
        self.watch = MetricsWatch()
        self.records: dict[tuple[str, str, str], TrialRecord] = {}  # (ns, trial, trial uid)
        self.memories: dict[str, TpeMemory] = {}  # experiment uid -> its TPE study in memory

    def tpe_memory(self, exp: Obj) -> TpeMemory:
        return self.memories.setdefault(exp["metadata"].get("uid") or "", TpeMemory())

    def reconcile(self, exp: Obj) -> None:
        _Pass(self, exp).run()

    def metrics_due(self, now: float) -> set[tuple[str, str]]:
        """Read what running trials printed since the last look; the experiments (namespace,
        name) where a stopping rule has a report to decide on now (:mod:`.watch`)."""
        return self.watch.due(now)

    def next_look(self, now: float) -> float | None:
        """When to look at running trials' metrics files again (None: none is watched)."""
        return now + self.look_seconds if self.watch else None

    def record(self, trial: Obj, new: bool = False) -> TrialRecord:
        """The trial's metrics (``new``: a trial this pass created, with nothing stored yet)."""
        meta = trial["metadata"]
        key = (meta.get("namespace") or "default", meta["name"], meta.get("uid") or "")
        rec = self.records.get(key)
        if rec is None:
            rec = TrialRecord(key[0], key[1], trial["spec"]["experiment"], loaded=new)
            rec.load(self.ctx.store)
            self.records[key] = rec
        return rec

    def collect_garbage(self) -> int:
        """Remove the metrics (segments, files, memory) of experiments and trials that are gone."""
        trials = {
            (t["metadata"].get("namespace") or "default", t["metadata"]["name"])
            for t in self.ctx.cache.list("Trial")
        }
        experiments = {
            (e["metadata"].get("namespace") or "default", e["metadata"]["name"])
            for e in self.ctx.cache.list("Experiment")
        }
        removed = 0
        for seg in self.ctx.store.list("TrialMetrics").items:
            ns = seg["metadata"].get("namespace") or "default"
            if (ns, seg["spec"]["trial"]) not in trials:
                try:
                    self.ctx.writer().delete("TrialMetrics", seg["metadata"]["name"], ns)
                    removed += 1
                except NotFound:
                    pass
        for key in [k for k in self.records if (k[0], k[1]) not in trials]:
            del self.records[key]
        self.watch.keep({watch_key(e) for e in self.ctx.cache.list("Experiment")})
        uids = {e["metadata"].get("uid") for e in self.ctx.cache.list("Experiment")}
        for uid in [u for u in self.memories if u not in uids]:
            del self.memories[uid]
        root = self.ctx.home / "experiments"
        if root.is_dir():
            for ns_dir in root.iterdir():
                for exp_dir in ns_dir.iterdir() if ns_dir.is_dir() else []:
                    if (ns_dir.name, exp_dir.name) not in experiments:
                        shutil.rmtree(exp_dir, ignore_errors=True)
        return removed


@dataclass
class _Pass:
    ctl: ExperimentController
    original: Obj
    exp: Obj = field(init=False)
    events: list[EventSpec] = field(default_factory=list)
    actions: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.ctx: Context = self.ctl.ctx
        self.exp = copy.deepcopy(self.original)
        self.status: Obj = self.exp.setdefault("status", {})
        self.spec: Obj = self.exp["spec"]
        meta = self.exp["metadata"]
        self.name, self.ns, self.uid = meta["name"], meta.get("namespace") or "default", meta.get("uid")
        self.now = self.ctx.now()

    # -- the pass ------------------------------------------------------------------------------

    def run(self) -> None:
        self.ctl.watch.set(watch_key(self.exp), [])  # until this pass says what to watch
        if self.exp["metadata"].get("deletionTimestamp"):
            return
        names = [p["name"] for p in self.spec["parameters"]]
        try:
            plan = plan_search(self.spec, names)
        except PlanErrors as exc:  # validated on apply; only an edit that bypassed it lands here
            if experiment_phase(self.exp) in (None, ExperimentPhase.CREATED, ExperimentPhase.RUNNING):
                self._start()
                self.events.append(
                    move_experiment(self.exp, ExperimentPhase.FAILED, "InvalidSpec", str(exc), self.now)
                )
            self._write()
            return
        self._start(plan)
        works = self._observe(plan)
        current = experiment_phase(self.exp)
        if current is ExperimentPhase.SUCCEEDED and self._restartable(works):
            self.events.append(
                move_experiment(
                    self.exp,
                    ExperimentPhase.RUNNING,
                    "Restarted",
                    "maxTrialCount was raised: it runs on",
                    self.now,
                )
            )
            current = ExperimentPhase.RUNNING
        if current is ExperimentPhase.RUNNING:
            ended = conclusion(self.exp, plan, works)
            if ended is not None:
                phase, reason, message = ended
                self._kill(works, message)
                self.events.append(move_experiment(self.exp, phase, reason, message, self.now))
            else:
                slots = Slots(self.ctl, self.exp, plan, works, self.now)
                fill_slots(slots)
                works += slots.created
                if slots.exhausted:
                    self.status.setdefault("suggestion", {})["exhausted"] = True
        self._store_trials(works)
        self._jobs(works)
        self._summarise(works)
        self._write()
        if any(w.phase in ACTIVE for w in works):
            self.ctx.wake_at(self.now + self.ctl.poll_seconds, self.original)
            self.ctl.watch.set(watch_key(self.exp), self._watched(plan, works))

    def _watched(self, plan: SearchPlan, works: list[TrialWork]) -> list[Source]:
        """The running trials' metrics files, each with the report count at which a stopping
        rule decides about it next (none without a rule)."""
        objective = self.spec["objective"]["objectiveMetricName"]
        completed = sum(1 for w in works if w.phase is TrialPhase.SUCCEEDED)
        # The median rule decides at every report from start_step on, once enough trials ended.
        median = (
            plan.median.start_step if plan.median and completed >= plan.median.min_trials_required else None
        )
        out = []
        for w in works:
            source = (
                metrics_source(self.exp, w.trial, self.ctx.home) if w.phase is TrialPhase.RUNNING else None
            )
            if source is None:
                continue
            due = median
            if plan.asha is not None:
                rungs = len(w.status.get("rungs") or [])
                nxt = next_milestone(plan.asha, int(w.trial["spec"].get("bracket") or 0), rungs)
                if nxt is not None:
                    due = nxt[1] if due is None else min(due, nxt[1])
            if due is not None:
                out.append(Source(source[0], source[1], w.record, self.parser, objective, due))
        return out

    def _start(self, plan: SearchPlan | None = None) -> None:
        if experiment_phase(self.exp) is not None:
            return
        seed = (
            plan.seed
            if plan is not None and plan.seed is not None
            else random.SystemRandom().randrange(2**31)
        )
        self.status["suggestion"] = {"seed": int(seed), "exhausted": False}
        self.status["startTime"] = iso(self.now)
        self.events.append(
            move_experiment(
                self.exp, ExperimentPhase.CREATED, "Created", "the experiment was accepted", self.now
            )
        )
        self.events.append(
            move_experiment(
                self.exp,
                ExperimentPhase.RUNNING,
                "Running",
                f"searching with {self.spec['algorithm']['algorithmName']}",
                self.now,
            )
        )

    # -- trials ----------------------------------------------------------------------------------

    def _observe(self, plan: SearchPlan) -> list[TrialWork]:
        objective = self.spec["objective"]
        collector = self.spec.get("metricsCollectorSpec") or {}
        source = collector.get("source") or {}
        self.parser = parser = LineParser(
            [objective["objectiveMetricName"], *(objective.get("additionalMetricNames") or [])],
            (source.get("filter") or {}).get("metricsFormat") or (),
            json_lines=((source.get("fileSystemPath") or {}).get("format") == "JSON"),
        )
        works = []
        for trial in self._trials():
            job = self.ctx.cache.get("TrainingJob", trial["metadata"]["name"], self.ns)
            if job is not None and not _owned(job, self.uid):
                job = None
            pods = (
                self.ctx.cache.pods_labelled(JOB_NAME_LABEL, trial["metadata"]["name"], self.ns)
                if job
                else []
            )
            work = TrialWork(trial, job, list(pods), self.ctl.record(trial))
            if work.phase in ACTIVE:
                collect(work, self.exp, self.ctx.home, self.ctl.logs, parser, self.now)
            works.append(work)
        completed = [
            w.record.series.curve(objective["objectiveMetricName"])
            for w in works
            if w.phase is TrialPhase.SUCCEEDED
        ]
        entries = rung_entries(works)
        for work in works:
            self._job_gone(work)
            follow_job(work, self.exp, self.now)
            decide(work, self.exp, plan, entries, completed, self.now)
            account_gpus(work, self.now)
            if work.metrics_changed:
                self._observation(work)
        return works

    def _job_gone(self, work: TrialWork) -> None:
        if work.job is not None or work.phase not in (TrialPhase.RUNNING, TrialPhase.STOPPING):
            return
        other = self.ctx.cache.get("TrainingJob", work.name, self.ns)
        why = (
            f"trainingjob {work.name} belongs to something else"
            if other is not None
            else f"its trainingjob {work.name} was deleted"
        )
        work.move(TrialPhase.FAILED, "JobLost", why, self.now)

    def _observation(self, work: TrialWork) -> None:
        objective = self.spec["objective"]
        summary = work.record.series.summary()
        work.status["observation"] = summary
        value = objective_value(summary, objective)
        if value is not None:
            work.status["objectiveValue"] = value

    def _trials(self) -> list[Obj]:
        out = [
            t
            for t in self.ctx.cache.list("Trial", self.ns)
            if (t["metadata"].get("labels") or {}).get(EXPERIMENT_LABEL) == self.name and _owned(t, self.uid)
        ]
        return sorted(out, key=lambda t: int(t["spec"]["index"]))

    def _restartable(self, works: list[TrialWork]) -> bool:
        cond = next((c for c in self.status.get("conditions") or [] if c["type"] == "Succeeded"), {})
        limit = self.spec.get("maxTrialCount")
        return cond.get("reason") == "MaxTrialsReached" and limit is not None and int(limit) > len(works)

    def _kill(self, works: list[TrialWork], why: str) -> None:
        for w in works:
            if w.phase in (TrialPhase.PENDING, TrialPhase.RUNNING):
                w.move(TrialPhase.KILLED, "ExperimentEnded", f"the experiment ended: {why}", self.now)

    # -- writes, then actions --------------------------------------------------------------------

    def _store_trials(self, works: list[TrialWork]) -> None:
        for w in works:
            save = w.record.unsaved and (
                w.phase not in ACTIVE or w.changed or self.now - w.record.saved_at >= self.ctl.save_seconds
            )
            if save:
                w.record.save(self.ctx.writer(), _owner(self.exp), self.now)
            if not w.changed:
                continue
            stored = self.ctx.update_status(w.trial)
            if stored is None:
                w.trial = w.original  # changed meanwhile: the next pass decides again
                w.events = []
                continue
            w.original = w.trial = stored
            for event in w.events:
                self.ctx.event(stored, event)

    def _jobs(self, works: list[TrialWork]) -> None:
        """Make each trial's job what its (stored) phase says: created for a waiting trial,
        suspended for a stopped or killed one, resumed for a promoted one."""
        for w in works:
            phase = w.phase
            if w.job is None:
                if phase is TrialPhase.PENDING and self.ctx.cache.get("TrainingJob", w.name, self.ns) is None:
                    self._create_job(w)
                continue
            suspend = phase in (TrialPhase.STOPPING, TrialPhase.EARLY_STOPPED, TrialPhase.KILLED)
            if phase in (TrialPhase.SUCCEEDED, TrialPhase.FAILED, TrialPhase.METRICS_UNAVAILABLE):
                continue
            run_policy = w.job["spec"].get("runPolicy") or {}
            if bool(run_policy.get("suspend")) != suspend and _job_active(w.job):
                changed = copy.deepcopy(w.job)
                changed["spec"].setdefault("runPolicy", {})["suspend"] = suspend
                self.ctx.update(changed)

    def _create_job(self, work: TrialWork) -> None:
        try:
            job = trial_job(self.exp, work.trial, self.ctx.home)
        except InvalidObject as exc:
            work.move(TrialPhase.FAILED, "InvalidTrialSpec", f"its job is not valid: {exc}", self.now)
            stored = self.ctx.update_status(work.trial)
            if stored is not None:
                for event in work.events:
                    self.ctx.event(stored, event)
            return
        metrics_dir(self.ctx.home, self.ns, self.name, work.name).mkdir(parents=True, exist_ok=True)
        created = self.ctx.create(job)
        if created is not None:
            work.job = created

    def _summarise(self, works: list[TrialWork]) -> None:
        self.status.update(counts(works))
        self.status["gpuSeconds"] = round(sum(gpu_seconds(w.trial, self.now) for w in works), 1)
        best = best_trial(self.spec["objective"], works)
        if best is not None:
            self.status["currentOptimalTrial"] = best

    def _write(self) -> None:
        if self.status == (self.original.get("status") or {}):
            return
        stored = self.ctx.update_status(self.exp)
        if stored is not None:
            for event in self.events:
                self.ctx.event(stored, event)


def _owned(obj: Obj, uid: str | None) -> bool:
    return any(r.get("uid") == uid for r in obj["metadata"].get("ownerReferences") or [])


def _owner(exp: Obj) -> Obj:
    return {
        "apiVersion": exp.get("apiVersion"),
        "kind": "Experiment",
        "name": exp["metadata"]["name"],
        "uid": exp["metadata"].get("uid"),
        "controller": True,
    }


def _job_active(job: Obj) -> bool:
    from muster.api.lifecycle import JobPhase, job_phase

    return job_phase(job) not in (JobPhase.SUCCEEDED, JobPhase.FAILED)
