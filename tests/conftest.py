"""Shared fixtures: the Kubernetes API stand-in and its helpers (see tests/k8s_standin/fixtures.py)."""

from k8s_standin.fixtures import kopf_process, kube_api, kube_cluster, namespace, run_operator, standin

__all__ = ["kopf_process", "kube_api", "kube_cluster", "namespace", "run_operator", "standin"]
