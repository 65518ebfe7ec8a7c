"""Reads an attnbench-bench (Google Benchmark) JSON file for the interop checks: the iteration
runs, after asserting that none of them errored."""
import json


def load_runs(path):
    """The file's JSON and its iteration runs; fails naming every case that errored."""
    d = json.load(open(path))
    runs = [b for b in d["benchmarks"] if b.get("run_type", "iteration") == "iteration"]
    errors = [f"{b['name']}: {b['error_message']}" for b in runs if b.get("error_occurred")]
    assert not errors, "cases failed: " + "; ".join(errors)
    return d, runs
