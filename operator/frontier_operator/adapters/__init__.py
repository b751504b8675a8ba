"""Adapters: the only modules that talk to Kubernetes and Prometheus."""
