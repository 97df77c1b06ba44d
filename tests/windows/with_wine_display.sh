#!/bin/sh
# Runs a command on the X display that wine_prefix.py started for WINEPREFIX
# (the Windows tests' shared prefix): D3D12 under wine needs one, and all
# processes of a prefix share the first one's.
set -eu
read -r display pid < "${WINEPREFIX:?}.display" || {
  echo "with_wine_display.sh: no ${WINEPREFIX}.display: the windows.zip test sets the prefix up" >&2
  exit 1
}
DISPLAY=$display exec "$@"
