"""Placement: filters, scores, device choice, topology and all-or-nothing gangs."""
