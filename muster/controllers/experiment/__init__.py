"""The Experiment controller: hyperparameter search whose trials are TrainingJobs admitted by
the queues like every other job (docs/experiments.md).

It owns the Experiment's status, its Trials (created with the sampler's values before their
jobs), the Trials' TrainingJobs (created, suspended when a trial is stopped early or killed,
resumed when an ASHA trial is promoted) and the TrialMetrics segments that hold each trial's
time series. Modules: ``controller`` (the pass), ``observe`` (one trial: metrics, phase, rules,
GPU-seconds), ``search`` (filling slots), ``results`` (counts, best trial, the end),
``suggest`` and ``space`` (samplers), ``stopping`` (ASHA and median rules), ``metrics`` and
``collect`` (parsing and storing metrics), ``watch`` (running trials' metrics files, looked at
between passes), ``trials`` (the trial's job), ``lifecycle``.
"""

from muster.controllers.experiment.controller import ExperimentController

__all__ = ["ExperimentController"]
