#!/usr/bin/env bash
# Spark resource discovery script for GPUs (spark.{driver,executor,worker}.resource.gpu.
# discoveryScript): prints {"name": "gpu", "addresses": ["0", "1", ...]}, one address per
# GPU that nvidia-smi lists, and an empty list on a machine without NVIDIA GPUs.
# CUDA_VISIBLE_DEVICES, when set, limits the list to those indices.
set -uo pipefail
ids=""
if command -v nvidia-smi > /dev/null 2>&1; then
    ids="$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | tr -d ' ')"
fi
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
    visible=",${CUDA_VISIBLE_DEVICES// /},"
    ids="$(for i in $ids; do case "$visible" in *",$i,"*) echo "$i" ;; esac; done)"
fi
list="$(for i in $ids; do printf '"%s",' "$i"; done)"
printf '{"name": "gpu", "addresses": [%s]}\n' "${list%,}"
