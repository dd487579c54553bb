"""Benchmarks: scheduling throughput, Filter latency, memory, scaling, packing."""
