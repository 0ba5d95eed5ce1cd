"""The TrainingJob controller: a job's Workload, its gang of pods with the torchrun
environment, restarts, backoff, deadlines, suspension, preemption with checkpoints
(:mod:`.controller`); the pure pieces that build Workloads, pods and environments (:mod:`.pods`).
"""
