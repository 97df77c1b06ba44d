#!/bin/sh
# Runs the Windows dmlserve.exe under wine as if it were the Linux binary, so
# that the Linux test suites (tests/python, ...) can start it through
# DMLSERVE_BINARY:
#
#   DMLSERVE_WINDOWS_EXE=C:\dmlserve\dmlserve.exe WINEPREFIX=... wine_dmlserve.sh [flags]
#
# SIGTERM and SIGINT become Ctrl+C for the Windows process (wine turns SIGINT
# into CTRL_C_EVENT), which drains like SIGTERM on Linux; the exit code is the
# server's. Linux paths in flags work as they are: wine's drive Z: is the
# Linux root and the working directory is on it.
set -u
wine=${WINE:-$(command -v wine64 || echo /usr/lib/wine/wine64)}
"$wine" "${DMLSERVE_WINDOWS_EXE:?the Windows path of dmlserve.exe}" "$@" &
child=$!
trap 'kill -INT "$child" 2>/dev/null' TERM INT
wait "$child"
rc=$?
# A trapped signal ends `wait` early: wait again until the server has exited.
while kill -0 "$child" 2>/dev/null; do
  wait "$child"
  rc=$?
done
exit "$rc"
