"""Planning KubeAI Models: model-server Pods with their rollout, files, cache and adapters.

:func:`~kaiwo_planner.domain.models.model_plan.plan_model` is the entry point; the modules
each build one part (see their docstrings). Pure, like the rest of the domain.
"""
