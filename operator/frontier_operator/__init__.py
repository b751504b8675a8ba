"""frontier-operator: run large LLMs on Kubernetes at the best point of the latency/throughput/cost frontier."""

__version__ = "0.1.0"
