#!/usr/bin/env bash
# Print the Debian mirror this machine's apt uses for bookworm (deb822 .sources or one-line sources.list).
set -euo pipefail
suite="${1:-bookworm}"
mirror=""
shopt -s nullglob
for f in /etc/apt/sources.list.d/*.sources; do
  mirror="$(awk -v suite="$suite" '
    BEGIN { RS=""; FS="\n" }
    {
      uris=""; ok=0; deb=0
      for (i = 1; i <= NF; i++) {
        if ($i ~ /^Types:/ && $i ~ /(^|[ \t])deb([ \t]|$)/) deb=1
        if ($i ~ /^URIs:/) { split($i, a, /[ \t]+/); uris=a[2] }
        if ($i ~ /^Suites:/) { n=split($i, s, /[ \t]+/); for (j = 2; j <= n; j++) if (s[j] == suite) ok=1 }
      }
      if (deb && ok && uris != "") { print uris; exit }
    }' "$f")"
  [[ -n "$mirror" ]] && break
done
if [[ -z "$mirror" ]]; then
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f "$f" ]] || continue
    mirror="$(awk -v suite="$suite" '$1 == "deb" { u=$2; if (u ~ /^\[/) u=$3; for (i=2;i<=NF;i++) if ($i == suite) { print u; exit } }' "$f")"
    [[ -n "$mirror" ]] && break
  done
fi
echo "${mirror:-http://deb.debian.org/debian}"
