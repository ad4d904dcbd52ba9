"""Selectors (DESIGN.md section 14): pick a variant's config per shape from stored ground truth, and score them on
held-out shapes from the stored rows alone (nothing is timed to score a selector)."""
