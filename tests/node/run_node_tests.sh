#!/usr/bin/env bash
# Installs client/node as a user would (npm pack, then npm install of the tarball, which
# brings @grpc/grpc-js and @grpc/proto-loader from the npm registry) into a scratch
# directory, type-checks a TypeScript use of its declarations, and runs its tests against
# a real server.   Usage: run_node_tests.sh REPOSITORY_ROOT DMLSERVE_BINARY
set -euo pipefail
root=$1
server_binary=$(realpath "$2")
scratch=$(mktemp -d)
server_pid=""
cleanup() {
  [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$scratch"
}
trap cleanup EXIT

# The repository's layout (client/node next to proto/), so that npm pack's prepack
# (copy-proto.js) finds the .proto files two levels up; no build output is written into
# the repository.
mkdir -p "$scratch/client" "$scratch/app"
cp -r "$root/client/node" "$scratch/client/node"
cp -r "$root/proto" "$scratch/proto"
tarball=$(cd "$scratch/client/node" && npm pack --silent --pack-destination "$scratch")
cd "$scratch/app"
npm init -y >/dev/null
npm install --no-audit --no-fund --silent "$scratch/$tarball" typescript@5
test -f node_modules/dmlserve-client/proto/dmlserve/v1/dmlserve.proto
cp "$root/tests/node/usage.ts" "$root/tests/node/client.test.js" .
npx --no-install tsc --strict --noEmit --target es2020 --module commonjs --moduleResolution node \
  --esModuleInterop --skipLibCheck usage.ts

"$server_binary" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 >"$scratch/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 600); do
  address=$(sed -n 's/^dmlserve: serving gRPC on //p' "$scratch/server.log")
  [[ -n "$address" ]] && break
  sleep 0.1
done
[[ -n "$address" ]] || { cat "$scratch/server.log"; exit 1; }
DMLSERVE_ADDRESS=$address node --test client.test.js
