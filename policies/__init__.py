"""Locky's shipped Casbin policy: ``model.conf`` and ``policy.csv`` (package data).

Operators override both with a directory of their own named by ``LOCKY_POLICY_DIR``.
"""
