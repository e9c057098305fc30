"""Shared helpers of the deploy/ checks (real tools: promtool, helm SDK, kubernetes-validate,
kubectl kustomize, check-jsonschema, a Prometheus server)."""

from __future__ import annotations








