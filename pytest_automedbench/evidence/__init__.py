"""What the harness itself observed of a run: workspace snapshots and provenance, the cases its outputs cover."""
