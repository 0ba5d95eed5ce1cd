"""The InferenceService controller: a served model's revisions and traffic split
(:mod:`.revisions`), its replica count (:mod:`.autoscaler`, Knative's KPA on the demand the
gateway measures), its replicas as one-pod Workloads admitted through the queues and their
pods (:mod:`.replicas`), restarts and drains, the routes handed to the gateway and the status
(:mod:`.controller`, :mod:`.status`). docs/serving.md is the user's guide.
"""
