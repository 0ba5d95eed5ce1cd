"""Nodes: registration from the runtime (:mod:`.registration`), health (GPU faults, taints,
NotReady, NodeLost, cordon and drain; :mod:`.health`) and GPU readings (:mod:`.gpumonitor`).
"""
