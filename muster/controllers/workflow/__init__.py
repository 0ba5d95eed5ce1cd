"""The Workflow controller: a DAG of pod and TrainingJob tasks walked pass by pass
(:mod:`.controller`), its task lifecycle (:mod:`.lifecycle`), DAG rules and fan-out
(:mod:`.dag`), expressions and values (:mod:`.expr`, :mod:`.values`), attempts (:mod:`.launch`),
the step cache (:mod:`.cache`), retry from failure (:mod:`.retry`) and artifacts
(:mod:`.artifacts`).
"""
