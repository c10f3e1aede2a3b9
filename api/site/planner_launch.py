"""The planner page's launch block: the best plan's command line, TensorRT-LLM's options file and the Kubernetes
manifest (deployment-plan's `best.launch`), each with a download link."""
from __future__ import annotations

from typing import Any
from urllib.parse import quote


def _data_url(text: str, mime: str) -> str:
    """A `data:` URL of `text` (UTF-8, percent-encoded): a download link that needs no second request."""
    return f"data:{mime};charset=utf-8," + quote(text, safe="")


def launch_view(launch: dict | None) -> dict[str, Any] | None:
    """What the page shows of the best plan's launch configuration (`launch` output of deployment-plan): the command,
    TensorRT-LLM's extra options file, the Kubernetes manifest, the notes, and each as a download link."""
    if not launch or not launch.get("command"):
        return None
    fw = launch.get("framework") or "serve"
    script = "#!/bin/sh\n# " + f"{fw} launch of the plan's best configuration (AI Infra Casebook)\n" + launch["command"] + "\n"
    files = [{"name": f"launch-{fw}.sh", "label": "command (shell script)", "href": _data_url(script, "text/x-shellscript")}]
    if launch.get("extra_config_yaml"):
        files.append({"name": "extra_llm_api_options.yaml", "label": "TensorRT-LLM extra options (YAML)",
                      "href": _data_url(launch["extra_config_yaml"], "application/yaml")})
    if launch.get("kubernetes_manifest_yaml"):
        files.append({"name": f"{fw}-deployment.yaml", "label": "Kubernetes manifest (YAML)",
                      "href": _data_url(launch["kubernetes_manifest_yaml"], "application/yaml")})
    return {"framework": fw, "command": launch["command"], "extra": launch.get("extra_config_yaml"),
            "manifest": launch.get("kubernetes_manifest_yaml") or "", "image": launch.get("image"),
            "replicas": launch.get("replicas"), "devices": launch.get("devices_per_replica"),
            "multi_node": bool(launch.get("multi_node")), "notes": list(launch.get("notes") or []), "files": files}


__all__ = ["launch_view"]
