#!/usr/bin/env bash
# Validates the Kubernetes manifests in deploy/kubernetes without a cluster
# (check_manifests.js says what it checks). Installs the pinned npm packages of
# package.json / package-lock.json (the Kubernetes and Prometheus Operator
# schemas, a YAML parser, TypeScript) from the npm registry into a scratch
# directory, as tests/node/run_node_tests.sh does.
# Usage: run_manifest_checks.sh REPOSITORY_ROOT [DMLSERVE_BINARY] [MANIFEST_DIR]
#   DMLSERVE_BINARY: also load the ConfigMap repositories and start every
#     manifest's server flags with the real server ("" to leave it out).
#   MANIFEST_DIR: the manifests to check (default: REPOSITORY_ROOT/deploy/kubernetes).
# Exits 77 (ctest: skipped) when node or npm is missing, 1 on any problem.
set -euo pipefail
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "run_manifest_checks: node and npm are needed; skipped"
  exit 77
fi
root=$(realpath "$1")
server_binary=${2:+$(realpath "$2")}
manifests=$(realpath "${3:-$root/deploy/kubernetes}")
here=$(dirname "$(realpath "$0")")

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp "$here/package.json" "$here/package-lock.json" "$here/check_manifests.js" "$here/kserve.d.ts" \
  "$scratch/"
cd "$scratch"
npm ci --no-audit --no-fund --silent

args=(--root="$root" --manifests="$manifests")
[[ -n "$server_binary" ]] && args+=(--server="$server_binary")
node check_manifests.js "${args[@]}"
