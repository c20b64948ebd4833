"""``veriscale bench``: reproduce the seed's setups on any model and measure the verifier.

    from veriscale.bench.datasets import load_pairs, sample
    from veriscale.bench.runner import Bench, BenchConfig, expand_configs, parse_sweeps

Modules: ``metrics`` (accuracy, tie rate, SNR, pass@1, oracle, random, selected),
``datasets`` (labelled pairs and pools, seeded subsample), ``runner`` (configs, sweeps, cost
estimate, runs through the store), ``plot`` (PNG).
"""
