#!/usr/bin/env bash
# Spark resource discovery script for GPUs (spark.{driver,executor,worker}.resource.gpu.
# discoveryScript): prints {"name": "gpu", "addresses": ["0", "1", ...]}, one address per
# GPU that nvidia-smi lists (its index), and an empty list on a machine without NVIDIA GPUs.
#
# CUDA_VISIBLE_DEVICES, when set (YARN, a container runtime, a scheduler), limits the list to
# the GPUs it names, in its order, read as CUDA reads it: an index, a GPU UUID ("GPU-...", whole
# or a unique prefix) mapped to that GPU's index, or a MIG device ("MIG-...") that nvidia-smi -L
# lists, kept as its own address (a task given it gets CUDA_VISIBLE_DEVICES=MIG-...). Like CUDA,
# the list stops at the first entry that names no device here.
set -uo pipefail
command -v nvidia-smi > /dev/null 2>&1 || { echo '{"name": "gpu", "addresses": []}'; exit 0; }
inventory="$(nvidia-smi --query-gpu=index,uuid --format=csv,noheader 2> /dev/null | tr -d ' ')"
ids=()
if [ -z "${CUDA_VISIBLE_DEVICES+set}" ]; then
    while IFS=, read -r index _; do [ -n "$index" ] && ids+=("$index"); done <<< "$inventory"
else
    migs="$(nvidia-smi -L 2> /dev/null | sed -n 's/.*(UUID: \(MIG-[^)]*\)).*/\1/p')"
    IFS=, read -r -a wanted <<< "${CUDA_VISIBLE_DEVICES// /}"
    for entry in "${wanted[@]}"; do
        case "$entry" in
            MIG-*) found="$(grep -F -- "$entry" <<< "$migs")" ;;
            GPU-*) found="$(awk -F, -v p="$entry" 'index($2, p) == 1 { print $1 }' <<< "$inventory")" ;;
            *) found="$(awk -F, -v i="$entry" '$1 == i { print $1 }' <<< "$inventory")" ;;
        esac
        # none, or an ambiguous prefix: CUDA sees no device from here on
        [ -n "$found" ] && [ "$(wc -l <<< "$found")" -eq 1 ] || break
        case " ${ids[*]} " in *" $found "*) ;; *) ids+=("$found") ;; esac
    done
fi
list="$(for i in "${ids[@]}"; do printf '"%s",' "$i"; done)"
printf '{"name": "gpu", "addresses": [%s]}\n' "${list%,}"
