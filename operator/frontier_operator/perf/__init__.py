"""Performance model: (serving configuration, workload) → latency percentiles, throughput, memory, cost. Pure."""
