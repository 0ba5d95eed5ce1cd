"""Pods between the store and the runtime: the executor that starts bound pods, follows them and
writes their status (:mod:`.executor`, with :mod:`.launch` turning a pod into a launch), stop
requests (:mod:`.stop`) and garbage collection of pods whose owner is gone (:mod:`.gc`).
"""
