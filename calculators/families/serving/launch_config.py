"""The launch configuration of a deployment plan (issue #25 item 6): the serving command line (vLLM, SGLang,
TensorRT-LLM) and a Kubernetes manifest for the plan's best configuration.

The code lives in `_launch_config` so that the planner (`deployment_plan`, same package) may import it: a family
module imports only the private helpers of its own package. This public name is what readers and tests look for.
"""
from __future__ import annotations

from calculators.families.serving._launch_config import (
    checkpoint_for, COMMAND, DEVICES_PER_NODE, FRAMEWORKS, HEALTH_PATH, IMAGE, launch_config, launch_for_plan, PORT,
)

__all__ = ["COMMAND", "DEVICES_PER_NODE", "FRAMEWORKS", "HEALTH_PATH", "IMAGE", "PORT", "checkpoint_for", "launch_config",
           "launch_for_plan"]

CALCULATORS: list = []
