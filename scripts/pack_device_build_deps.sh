#!/usr/bin/env bash
# Packs the Debian packages a CUDA build of ninfer needs (headers, pkg-config files and shared
# libraries of fmt, nlohmann-json, CLI11, GoogleTest, PCRE2, cpp-httplib and what it links,
# and pkgconf) into .carry/deps.tgz, for a GPU machine without them and without a network
# (bench/gpu_session.sh unpacks it to /tmp/ninfer_deps). Static libraries other than
# GoogleTest's are dropped to keep the file small (~2 MB).
#   scripts/pack_device_build_deps.sh
set -euo pipefail
PKGS=(libfmt-dev libfmt9 nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev googletest libpcre2-dev
      libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 libcpp-httplib-dev libcpp-httplib0.11 libssl-dev
      libssl3 libbrotli-dev libbrotli1 zlib1g-dev pkgconf pkgconf-bin libpkgconf3 libutf8proc-dev libutf8proc2)
debs=$(mktemp -d)
stage=$(mktemp -d)
trap 'rm -rf "$debs" "$stage"' EXIT
(cd "$debs" && apt-get download "${PKGS[@]}" >/dev/null)
for f in "$debs"/*.deb; do dpkg -x "$f" "$stage"; done
find "$stage" -name '*.a' ! -name 'libgtest*' ! -name 'libgmock*' -delete
rm -rf "$stage/usr/share/doc" "$stage/usr/share/man" "$stage/usr/src"
mkdir -p .carry
tar czf .carry/deps.tgz -C "$stage" usr
echo "wrote .carry/deps.tgz ($(du -h .carry/deps.tgz | cut -f1))"
