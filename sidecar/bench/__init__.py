"""`sidecar bench`: speed measured side by side (ours against a baseline) in one run."""
