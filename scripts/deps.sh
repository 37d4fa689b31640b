#!/usr/bin/env bash
# Installs the Debian packages ninfer's build and tests need (Debian 12). Idempotent.
#   scripts/deps.sh              the build and test dependencies
#   scripts/deps.sh --figures    also python3-matplotlib, for scripts/make_figures.py (optional)
#   scripts/deps.sh --fuzz       also clang 14 with libFuzzer and its OpenMP, for scripts/fuzz.sh
set -euo pipefail
PKGS=(g++ cmake ninja-build pkg-config libgtest-dev libgmock-dev nlohmann-json3-dev libfmt-dev
      libcli11-dev libpcre2-dev libutf8proc-dev libcpp-httplib-dev libssl-dev)
# Optional: without it the test that needs it skips. qemu-user: tests/portable_cpu.sh runs ninfer
# as a CPU without AVX.
OPTIONAL=(qemu-user)
for a in "$@"; do
  case "$a" in
    --figures) PKGS+=(python3-matplotlib) ;;
    --fuzz) PKGS+=(clang libclang-rt-14-dev libomp-14-dev) ;;
    *) echo "scripts/deps.sh: unknown option '$a' (expected --figures or --fuzz)" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js + npm run the OpenAI SDK client test. A nodesource nodejs already bundles npm (and
# conflicts with Debian's npm package), so only install what is missing as a command.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
for p in "${OPTIONAL[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" && continue
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  { DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$p" ||
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$p"; }
  } > /dev/null 2>&1 || echo "scripts/deps.sh: optional package $p not installed (the tests that need it skip)" >&2
done
