"""`sidecar tune`: the served search configuration chosen by cross-validation on judgements."""
