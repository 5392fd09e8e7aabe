#!/usr/bin/env bash
# A second Vulkan driver beside the system one: Mesa >= 25 lavapipe from Debian bookworm-backports.
#   json=$(bash scripts/second_driver.sh) && VK_ICD_FILENAMES="$json" python -m fuelvk info
# Downloads the mesa-vulkan-drivers .deb for this machine's architecture, unpacks only that package
# (dpkg -x, nothing is installed or replaced) into ~/.cache/fuelvk/mesa-backports-<arch>, points the
# lavapipe ICD json at the unpacked library and prints the json's path (the only thing on stdout).
# It runs against the system's other libraries (libLLVM-15 on bookworm): ldd must resolve them all.
# Cached: a second run only prints the path.
set -euo pipefail
MIRROR="${FUELVK_DEBIAN_MIRROR:-https://deb.debian.org/debian}"
SUITE=bookworm-backports
MIN_MAJOR=25
arch="$(dpkg --print-architecture)"
dest="${XDG_CACHE_HOME:-$HOME/.cache}/fuelvk/mesa-backports-$arch"
json="$dest/lvp_icd.json"

if [ ! -f "$json" ]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  curl -fsSL --retry 3 "$MIRROR/dists/$SUITE/main/binary-$arch/Packages.xz" | xz -d > "$tmp/Packages"
  # The mesa-vulkan-drivers stanza with the highest version: "version filename" per stanza.
  best=""
  while read -r ver file; do
    if [ -z "$best" ] || dpkg --compare-versions "$ver" gt "${best%% *}"; then best="$ver $file"; fi
  done < <(awk '/^Package: /{p=($2=="mesa-vulkan-drivers")} p&&/^Version: /{v=$2} p&&/^Filename: /{print v, $2}' \
             "$tmp/Packages")
  [ -n "$best" ] || { echo "second_driver: no mesa-vulkan-drivers in $SUITE/$arch" >&2; exit 1; }
  ver="${best%% *}"; file="${best#* }"
  if [ "${ver%%.*}" -lt "$MIN_MAJOR" ] 2>/dev/null; then
    echo "second_driver: $SUITE has mesa-vulkan-drivers $ver, need >= $MIN_MAJOR" >&2; exit 1
  fi
  echo "second_driver: mesa-vulkan-drivers $ver from $SUITE" >&2
  curl -fsSL --retry 3 -o "$tmp/mesa.deb" "$MIRROR/$file"
  dpkg -x "$tmp/mesa.deb" "$tmp/root"
  lib="$(find "$tmp/root" -name 'libvulkan_lvp.so' | head -n1)"
  src_json="$(find "$tmp/root" -name 'lvp_icd*.json' | head -n1)"
  [ -n "$lib" ] && [ -n "$src_json" ] || { echo "second_driver: no lavapipe in the .deb" >&2; exit 1; }
  missing="$(ldd "$lib" | awk '/not found/{print $1}')"
  if [ -n "$missing" ]; then
    echo "second_driver: $lib needs libraries this system lacks: $missing" >&2; exit 1
  fi
  rm -rf "$dest.new"; mkdir -p "$dest.new"
  cp "$lib" "$dest.new/libvulkan_lvp.so"
  echo "$ver" > "$dest.new/VERSION"
  python3 - "$src_json" "$dest.new/lvp_icd.json" "$dest/libvulkan_lvp.so" <<'EOF'
import json, sys
src, out, lib = sys.argv[1:]
d = json.load(open(src))
d["ICD"]["library_path"] = lib
json.dump(d, open(out, "w"), indent=4)
EOF
  rm -rf "$dest"; mv "$dest.new" "$dest"
fi
echo "$json"
