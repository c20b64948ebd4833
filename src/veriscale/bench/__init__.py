"""``veriscale bench``: measure the verifier on labelled pairs or pools of runs, on any model.

    from veriscale.bench.datasets import load_pairs, sample
    from veriscale.bench.bench_runner import Bench, BenchConfig, expand_configs, parse_sweeps

Modules: ``metrics`` (accuracy, tie rate, SNR, pass@1, oracle, random, selected),
``datasets`` (labelled pairs and pools, seeded subsample), ``configs`` (configurations and
sweeps over ``SelectionSettings``), ``runner`` (plan once, estimate, run through the store),
``report`` (rows, estimate, report), ``plot`` (PNG).
"""
