#!/usr/bin/env bash
# Installs what nvshare's build and tests need on Debian bookworm (a fresh
# machine with gcc, make and the CUDA toolkit). Used by the README's first
# command and by .ci/run, so both stay in step. Idempotent: installs only
# what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo

PKGS=(
  build-essential pkg-config git ca-certificates
  libcmocka-dev            # unit tests
  libcjson-dev             # scheduler status JSON, Pod annotations
  libmicrohttpd-dev        # Prometheus exporter
  libcurl4-openssl-dev     # Kubernetes API watch
  libgrpc-dev protobuf-c-compiler libprotobuf-c-dev protobuf-compiler-grpc  # device plugin
  python3 python3-grpcio python3-protobuf  # fake kubelet in tests
  prometheus               # promtool check metrics, live scrape test
  clang libclang-rt-14-dev # libFuzzer targets
  cppcheck clang-format shellcheck  # make lint / format
  util-linux procps psmisc # setpriv, pkill, fuser in tests
  yamllint buildah         # manifest lint, image builds in tests
  openssl curl             # fake API server certificates, scrapes in tests
  help2man                 # man pages of the programs (make man, install, deb)
  binutils dpkg-dev        # objdump (the library's glibc floor), dpkg-deb/dpkg-shlibdeps (make deb)
  systemd systemd-container  # the unit under a real systemd in a container (tests/system)
  jq                       # JSON in tests
)
# kubectl renders the kustomize manifests; Debian's kubernetes-client provides
# it, but conflicts with a kubectl package already installed from elsewhere.
command -v kubectl >/dev/null 2>&1 || PKGS+=(kubernetes-client)
# Node and npm (kubernetes-models schema validation, tests/k8s/tools): the
# machines ship Node 20 from NodeSource; Debian's npm would conflict with it.
command -v npm >/dev/null 2>&1 || PKGS+=(nodejs npm)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "== build and test dependencies already installed"
fi
# Node tools for the manifest schema check (pinned by package-lock.json).
tests/k8s/tools/install.sh
if [ ! -f "${CUDA_HOME:-/usr/local/cuda}/include/cuda.h" ]; then
  echo "CUDA toolkit headers not found at ${CUDA_HOME:-/usr/local/cuda}/include (set CUDA_HOME)" >&2
  exit 1
fi
